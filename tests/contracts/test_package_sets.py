"""The node and control package sets: a collector-only host gets no Kubernetes client and runs.

The wheelhouse is the one the roles build (roles/mco_common/files/build_wheelhouse.py, into the
checkout's .run/wheelhouse); its wheels come from pip's configured index, so this needs the network
pip is configured for, as `make run` does.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BUILDER = ROOT / "roles" / "mco_common" / "files" / "build_wheelhouse.py"
#: What only the analyzer and the extender need; a collector-only host must not carry it.
CONTROL_ONLY = ("kubernetes", "pydantic", "pydantic_core", "aiohttp", "pysimdjson")


def load_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_wheelhouse", BUILDER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pinned(lock: Path) -> dict[str, str]:
    """The pins of a lock and of those it includes, by normalized name."""
    return {name.lower().replace("_", "-"): version for name, version in load_builder().pins(lock)}


def test_the_node_set_is_the_control_set_without_the_kubernetes_client() -> None:
    node, control = pinned(ROOT / "requirements" / "node.txt"), pinned(ROOT / "requirements" / "control.txt")
    assert set(node) < set(control)
    assert not {name.replace("_", "-") for name in CONTROL_ONLY} & set(node)
    assert {"kubernetes", "pydantic", "aiohttp", "pysimdjson"} <= set(control)


def test_the_dev_lock_installs_the_control_and_build_sets_at_one_version_each() -> None:
    dev = (ROOT / "requirements" / "dev.txt").read_text().splitlines()
    assert {"-r control.txt", "-r build.txt"} <= set(dev)
    build = pinned(ROOT / "requirements" / "build.txt")
    control = pinned(ROOT / "requirements" / "control.txt")
    assert {name: build[name] for name in build.keys() & control.keys()} == {
        name: control[name] for name in build.keys() & control.keys()
    }


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    arch = platform.machine()
    out = ROOT / ".run" / "wheelhouse"
    subprocess.run([sys.executable, str(BUILDER), str(ROOT), str(out)], check=True, timeout=600)
    return out / arch


def test_the_node_archive_holds_the_node_set_only(wheelhouse: Path) -> None:
    with tarfile.open(wheelhouse / "node.tar") as tar:
        names = tar.getnames()
        runtime = tar.extractfile("runtime.txt")
        assert runtime is not None
        lock = runtime.read().decode()
    wheels = {n.split("-")[0].lower() for n in names if n.endswith(".whl")}
    assert wheels == {n.lower().replace("-", "_") for n in pinned(ROOT / "requirements" / "node.txt")} | {"mco_py"}
    assert not [n for n in names if n.lower().startswith(CONTROL_ONLY)]
    assert "kubernetes" not in lock


def test_each_set_names_its_own_build(wheelhouse: Path) -> None:
    """venv_check.py compares the venv's recorded build with the archive's: a host moved from one set
    to the other must not count as current."""
    stamps = []
    for name in ("node", "control"):
        with tarfile.open(wheelhouse / f"{name}.tar") as tar:
            stamp = tar.extractfile(".source-sha256")
            assert stamp is not None
            stamps.append(stamp.read().decode().strip())
    assert stamps[0].endswith("-node")
    assert stamps[1].endswith("-control")
    assert stamps[0].removesuffix("-node") == stamps[1].removesuffix("-control")


def test_a_collector_only_host_installs_the_node_set_and_runs_the_collector(wheelhouse: Path, tmp_path: Path) -> None:
    """What mco_common does on a node: the node archive, pip with no index, then the collector runs."""
    unpacked = tmp_path / "wheelhouse"
    with tarfile.open(wheelhouse / "node.tar") as tar:
        tar.extractall(unpacked, filter="data")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(unpacked)]
    subprocess.run([*pip, "-r", str(unpacked / "runtime.txt")], check=True, timeout=300)
    subprocess.run([*pip, "--no-deps", "mco-py"], check=True, timeout=300)
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format", "json"], capture_output=True, text=True, check=True
    )
    installed = {p["name"].lower().replace("-", "_") for p in json.loads(listed.stdout)}
    assert not installed & set(CONTROL_ONLY)

    # Every collector module imports without the control set, and pulls none of it in.
    probe = (
        "import pkgutil, importlib, sys, mco_py.collector as c\n"
        "for m in pkgutil.walk_packages(c.__path__, 'mco_py.collector.'): importlib.import_module(m.name)\n"
        "import mco_py.cli, mco_py.doctor.main\n"
        "print(sorted({m.split('.')[0] for m in sys.modules}))\n"
    )
    imported = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert not set(yaml.safe_load(imported.stdout)) & {"kubernetes", "pydantic", "aiohttp", "simdjson"}

    sample = subprocess.run(
        [str(venv / "bin" / "mco"), "collector", "--once", "--no-stream-enabled", "--bio-backend", "off", "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=tmp_path,
    )
    assert sample.returncode == 0, sample.stderr
    assert json.loads(sample.stdout)["backends"]["psi"] == "procfs"


def test_the_wheelhouse_builder_names_an_unsupported_architecture(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(BUILDER), str(ROOT), str(tmp_path), "--arch", "ppc64le"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2
    assert "no wheels for architecture ppc64le" in run.stderr
    assert "x86_64 and aarch64" in run.stderr


def test_the_role_and_the_builder_support_the_same_architectures() -> None:
    internal = yaml.safe_load((ROOT / "roles" / "mco_common" / "vars" / "main.yml").read_text())
    assert internal["__mco_common_architectures"] == list(load_builder().PLATFORMS)
