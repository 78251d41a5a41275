"""`mco analyzer` as a process (standalone): report file, metrics, rules hot reload, settings."""

from __future__ import annotations

import argparse
import atexit
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from mco_py.analyzer.main import add_arguments, load_settings
from mco_py.errors import ConfigError
from mco_py.model import Sample
from mco_py.rpc.analyzer.v1 import analyzer_pb2_grpc as pb_grpc
from tests.contracts import crd_schema
from tests.rpc import wire
from tests.rules_fixtures import SIGNAL, quick_rules_text
from tests.waiting import wait_until


@functools.cache
def _no_host_config() -> str:
    """An empty settings file: without ``--config`` the analyzer reads /etc/mco/analyzer.yaml if present,
    which on a host where MCO is deployed asks for TLS (tests give their settings as flags)."""
    fd, path = tempfile.mkstemp(prefix="mco-analyzer-test-", suffix=".yaml")
    with os.fdopen(fd, "w") as handle:
        handle.write("{}\n")
    atexit.register(os.unlink, path)
    return path


class Process:
    def __init__(self, *args: str) -> None:
        if not any(arg == "--config" or arg.startswith("--config=") for arg in args):
            args = ("--config", _no_host_config(), *args)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mco_py.cli", "analyzer", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.wait_for(lambda: any("grpc_port" in line for line in self.lines), "startup")
        first = next(line for line in self.lines if "grpc_port" in line)
        self.grpc_port = int(first["grpc_port"])
        self.metrics_port = int(first["metrics_port"])

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            try:
                self.lines.append(json.loads(raw))
            except ValueError:
                self.lines.append({"message": raw})

    def wait_for(self, cond: Callable[[], bool], what: str, timeout: float = 30) -> bool:
        """``cond`` holds while the analyzer runs (its log in the error otherwise)."""

        def alive_and() -> bool:
            if cond():
                return True
            if self.proc.poll() is not None:
                raise AssertionError(f"analyzer exited ({self.proc.returncode}) waiting for {what}: {self.lines}")
            return False

        try:
            return wait_until(alive_and, what, timeout)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}; log: {self.lines[-20:]}") from None

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as resp:
            text: str = resp.read().decode()
        return text

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        self._reader.join(30)  # EOF follows the exit; closing stderr under a running reader would crash it
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        return code


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[tuple[Process, Path, Path]]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(quick_rules_text("quick-1"))
    report = tmp_path / "state" / "report.json"
    (tmp_path / "analyzer.yaml").write_text("mode: standalone\n")
    proc = Process(
        "--config",
        str(tmp_path / "analyzer.yaml"),
        "--listen",
        "127.0.0.1:0",
        "--metrics-host",
        "127.0.0.1",
        "--metrics-port",
        "0",
        "--report-file",
        str(report),
        "--rules-file",
        str(rules),
        "--report-interval",
        "0.2",
        "--rules-interval",
        "0.2",
        "--identity",
        "test-analyzer",
    )
    yield proc, report, rules
    proc.stop()


def send(port: int, node: str, psi: float, seq: int) -> None:
    sample = Sample(node, time.time(), {SIGNAL: psi})
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        replies = list(
            pb_grpc.AnalyzerStub(ch).StreamSamples(
                iter([wire.batch_to_proto([sample], collector=node, sequence=seq)]), timeout=30
            )
        )
    assert [r.WhichOneof("kind") for r in replies[:2]] == ["features", "send_early"], replies
    acks = [r.ack for r in replies if r.WhichOneof("kind") == "ack"]
    assert [a.accepted for a in acks] == [1], replies


def read_report(path: Path) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc


def test_standalone_writes_valid_report_and_metrics(standalone: tuple[Process, Path, Path]) -> None:
    proc, report, _ = standalone
    send(proc.grpc_port, "node-hot", 90.0, 1)
    send(proc.grpc_port, "node-calm", 1.0, 1)

    def both() -> bool:
        names = {n["name"] for n in read_report(report).get("status", {}).get("nodes", [])}
        return names == {"node-hot", "node-calm"}

    proc.wait_for(both, "both nodes in the report file")
    doc = read_report(report)
    assert crd_schema.errors(doc) == []
    status = doc["status"]
    assert status["analyzer"] == {"identity": "test-analyzer", "rulesVersion": "quick-1"}
    hot = next(n for n in status["nodes"] if n["name"] == "node-hot")
    assert hot["level"] == "High"
    assert hot["dominant"] == "io"
    assert any("psiIoSomeRate=90 ≥ critical 50 (io sub-score 100)" in r for r in hot["reasons"])
    # written every interval even without changes
    first = status["lastUpdateTime"]
    proc.wait_for(lambda: read_report(report)["status"]["lastUpdateTime"] != first, "a later report")
    text = proc.metrics()
    assert 'mco_node_interference_level{node="node-hot"} 3.0' in text
    assert 'mco_node_interference_level{node="node-calm"} 0.0' in text
    assert "mco_analyzer_report_generation_duration_seconds_bucket" in text
    assert "mco_analyzer_leader 1.0" in text
    assert 'mco_node_interference_level{dimension="io",node="node-hot"} 3.0' in text
    assert 'mco_analyzer_rules_info{version="quick-1"} 1.0' in text
    shown = subprocess.run(
        [sys.executable, "-m", "mco_py.cli", "report", "--file", str(report), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "node-hot" in shown.stdout
    assert "High" in shown.stdout
    assert proc.stop() == 0


def test_rules_hot_reload_keeps_last_good_rules(standalone: tuple[Process, Path, Path]) -> None:
    proc, report, rules = standalone
    send(proc.grpc_port, "node-1", 30.0, 1)
    rules.write_text("version: broken\nsignals:\n  psiIoSomeAvg10: {warn: 50, critical: 10}\n")
    proc.wait_for(lambda: 'mco_analyzer_rules_reload_total{result="invalid"} 1.0' in proc.metrics(), "invalid")
    # stderr is read by a thread: the warning may reach proc.lines a little after the metric
    proc.wait_for(
        lambda: any("critical (10) must be greater than warn (50)" in line.get("message", "") for line in proc.lines),
        "the invalid-rules warning in the log",
    )
    proc.wait_for(lambda: "status" in read_report(report), "a report written after the bad rules")
    assert read_report(report)["status"]["analyzer"]["rulesVersion"] == "quick-1"
    rules.write_text(quick_rules_text("v2-test"))
    proc.wait_for(
        lambda: read_report(report).get("status", {}).get("analyzer", {}).get("rulesVersion") == "v2-test",
        "new rules version in the report",
    )
    assert 'mco_analyzer_rules_info{version="v2-test"} 1.0' in proc.metrics()


def test_missing_rules_file_uses_defaults_with_warning(tmp_path: Path) -> None:
    proc = Process(
        "--listen",
        "127.0.0.1:0",
        "--metrics-host",
        "127.0.0.1",
        "--metrics-port",
        "0",
        "--report-file",
        str(tmp_path / "r.json"),
        "--rules-file",
        str(tmp_path / "absent.yaml"),
        "--report-interval",
        "0.2",
    )
    try:
        proc.wait_for((tmp_path / "r.json").exists, "report file")
        warning = next(line for line in proc.lines if "no detection rules" in line.get("message", ""))
        assert warning["level"] == "warning"
        assert "built-in defaults" in warning["message"]
    finally:
        assert proc.stop() == 0


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_flags_override_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "analyzer.yaml"
    cfg.write_text("mode: cluster\nreportInterval: 7\nlisten: ':1234'\nidentity: from-file\n")
    env = {"MCO_ANALYZER_REPORT_INTERVAL": "3", "MCO_ANALYZER_LISTEN": ":2345"}
    settings = load_settings(parse("--config", str(cfg), "--report-interval", "2"), env).settings
    assert (settings.mode, settings.report_interval, settings.listen, settings.identity) == (
        "cluster",
        2.0,
        ":2345",
        "from-file",
    )


def test_snake_case_keys_of_earlier_releases_are_read_with_a_warning(tmp_path: Path) -> None:
    cfg = tmp_path / "analyzer.yaml"
    cfg.write_text(
        'mode: cluster\nidentity: "an-1"\nlisten: ":9876"\nmetrics_port: 9878\nreport_interval: 5\n'
        'report_file: "/var/lib/mco/report.json"\nreport_name: "cluster"\nrules_file: "/etc/mco/rules.yaml"\n'
        'rules_interval: 30\nkubeconfig: ""\ntls_ca: ""\ntls_cert: ""\ntls_key: ""\ntoken_file: ""\n'
        'log_level: "info"\n'
    )
    loaded = load_settings(parse("--config", str(cfg), "--rules-configmap", "rules"), {})
    settings = loaded.settings
    assert (settings.mode, settings.identity, settings.metrics_port, settings.rules_interval) == (
        "cluster",
        "an-1",
        9878,
        30.0,
    )
    assert (settings.tls_cert, settings.rules_config_map) == ("", "rules")
    assert loaded.notes == (
        "--rules-configmap is now --rules-config-map; rename it (the old flag is still read)",
        f"{cfg}: old keys read: report_file → reportFile, report_name → reportName, rules_file → rulesFile, "
        "rules_interval → rulesInterval, metrics_port → metricsPort, report_interval → reportInterval, tls_cert → "
        "tlsCert, tls_key → tlsKey, tls_ca → tlsCa, token_file → tokenFile, log_level → logLevel; rename them "
        "(docs: docs/analyzer.md#settings)",
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("reportIntervall: 5\n", "reportIntervall: unknown key; did you mean 'reportInterval'"),
        ("reportInterval: soon\n", "reportInterval: expected float, got str 'soon'"),
        ("mode: both\n", "mode: expected one of standalone, cluster, got 'both'"),
        ("- a\n", "expected a mapping"),
        ("tlsCert: /x\n", "tlsCert: tlsCert and tlsKey go together"),
        ("reportInterval: 0\n", "reportInterval: expected float > 0.0, got 0"),
    ],
)
def test_bad_config_is_explained(tmp_path: Path, text: str, words: str) -> None:
    cfg = tmp_path / "analyzer.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=words):
        load_settings(parse("--config", str(cfg)), {})


def test_bad_config_exits_2_with_message(tmp_path: Path) -> None:
    cfg = tmp_path / "analyzer.yaml"
    cfg.write_text("bogus: 1\n")
    out = subprocess.run(
        [sys.executable, "-m", "mco_py.cli", "analyzer", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert f"{cfg}: bogus: unknown key" in out.stderr
