"""The Go modules that build programs together stay pinned together: the scheduler plugins'
module (scheduler/go.mod) and the cluster tests' (tests/cluster/go.mod) replace the same
modules with the same versions and build the same Volcano and Kubernetes, so the schedulers with
mco-plugin are the programs the cluster tier runs beside, with one build cache."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCHEDULER = ROOT / "scheduler" / "go.mod"
CLUSTER = ROOT / "tests" / "cluster" / "go.mod"


def _replaces(path: Path) -> dict[str, str]:
    block = re.search(r"^replace \((.*?)^\)", path.read_text(), re.S | re.M)
    assert block, f"{path}: no replace block"
    out = {}
    for raw in block[1].splitlines():
        line = raw.split("//", 1)[0].strip()
        if line:
            old, new = (part.strip() for part in line.split("=>"))
            out[old] = new
    return out


def _versions(path: Path) -> dict[str, str]:
    """Each required module's version as built: its replacement's where it is replaced."""
    required = dict(re.findall(r"^\s+(\S+) (v\S+)(?: // indirect)?$", path.read_text(), re.M))
    replaced = {old: new.split()[-1] for old, new in _replaces(path).items()}
    return {module: replaced.get(module, version) for module, version in required.items()}


def test_the_scheduler_module_repeats_the_cluster_modules_replaces() -> None:
    assert _replaces(SCHEDULER) == _replaces(CLUSTER)
    assert len(_replaces(SCHEDULER)) > 30


def test_both_modules_build_the_same_volcano_and_kubernetes() -> None:
    scheduler, cluster = _versions(SCHEDULER), _versions(CLUSTER)
    for module in ("volcano.sh/volcano", "k8s.io/kubernetes", "k8s.io/client-go", "k8s.io/kube-scheduler"):
        assert scheduler[module] == cluster[module], module
    assert scheduler["volcano.sh/volcano"] == "v1.14.1"
    assert scheduler["k8s.io/kubernetes"] == "v1.34.1"
