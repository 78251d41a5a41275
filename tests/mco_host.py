"""Three MCO parts running on this host as real processes, from configuration files as the
roles write them (loopback ports, a temporary /etc), for tests that look at a running MCO from
outside: ``mco doctor``, a real Prometheus scraping them."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from mco_py.analysis.rules import default_rules_text
from tests.cluster.cluster import free_port

ROOT = Path(__file__).resolve().parents[1]
HOST_TREE = ROOT / "tests" / "collector" / "fixtures" / "host"
MCO = [sys.executable, "-m", "mco_py.cli"]
PARTS = ("collector", "analyzer", "extender")


@dataclass
class Host:
    etc: Path
    rules: Path
    ports: dict[str, int]
    procs: dict[str, subprocess.Popen[bytes]]

    def start(self, part: str) -> None:
        with (self.etc / f"{part}.log").open("ab") as log:  # the child keeps its own descriptor
            self.procs[part] = subprocess.Popen(
                [*MCO, part, "--config", str(self.etc / f"{part}.yaml")], stdout=subprocess.DEVNULL, stderr=log
            )

    def stop(self, part: str) -> None:
        proc = self.procs.pop(part)
        proc.terminate()
        proc.wait(timeout=20)


@contextlib.contextmanager
def running_host(tmp_path: Path, *, real_host: bool = False, bio_backend: str = "diskstats") -> Iterator[Host]:
    """The three parts, started and stopped. The collector reads the fixture host tree (frozen
    signals), or with ``real_host`` this machine's /proc and /sys (block I/O with it, measured by
    ``bio_backend``)."""
    etc = tmp_path / "etc"
    etc.mkdir()
    if not real_host:
        shutil.copytree(HOST_TREE, tmp_path / "node")
    rules = tmp_path / "rules.yaml"
    rules.write_text(default_rules_text())
    ports = {name: free_port() for name in ("grpc", "collector", "analyzer", "extender")}
    report = tmp_path / "report.json"
    configs = {
        "analyzer": {
            "mode": "standalone",
            "identity": "doctor-test",
            "listen": f"127.0.0.1:{ports['grpc']}",
            "metricsHost": "127.0.0.1",
            "metricsPort": ports["analyzer"],
            "reportInterval": 0.3,
            "reportMinInterval": 0.1,
            "reportFile": str(report),
            "rulesFile": str(rules),
            "rulesInterval": 0.3,
        },
        "collector": {
            "nodeName": "node-1",
            "interval": 0.3,
            "metricsHost": "127.0.0.1",
            "metricsPort": ports["collector"],
            "bioBackend": bio_backend,
            "llc": "off",
            "procRoot": "/proc" if real_host else str(tmp_path / "node" / "proc"),
            "sysRoot": "/sys" if real_host else str(tmp_path / "node" / "sys"),
            "stream": {"enabled": True, "analyzers": [f"127.0.0.1:{ports['grpc']}"]},
        },
        "extender": {
            "mode": "standalone",
            "listen": f"127.0.0.1:{ports['extender']}",
            "reportFile": str(report),
            "crStatusTTLSeconds": 2,
        },
    }
    for part, config in configs.items():
        (etc / f"{part}.yaml").write_text(yaml.safe_dump(config))
    state = Host(etc, rules, ports, {})
    try:
        for part in ("analyzer", "collector", "extender"):
            state.start(part)
        yield state
    finally:
        for proc in state.procs.values():
            proc.kill()
            proc.wait(timeout=20)
