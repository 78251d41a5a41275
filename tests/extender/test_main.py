"""``mco extender`` as a process: config file, flags, listening, SIGTERM, bad config."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request

from . import bodies, go_contract
from .conftest import ReportFile


def start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mco_py.cli", "extender", *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def wait_port(proc: subprocess.Popen[str]) -> int:
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        record = json.loads(line)
        if record.get("message") == "extender listening":
            return int(record["port"])
    proc.kill()
    raise AssertionError("extender did not report its port")


def test_runs_from_config_file_and_stops_on_sigterm(tmp_path):
    report = ReportFile(tmp_path / "report.json")
    report.write(updated=time.time())
    config = tmp_path / "extender.yaml"
    config.write_text(f"reportFile: {report.path}\nvolcanoVersion: '1.10'\nlisten: ':9879'\n")
    proc = start(["--config", str(config), "--listen", "127.0.0.1:0"])
    try:
        port = wait_port(proc)
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/volcano/predicate",
            data=bodies.dumps(bodies.predicate_body("worker-1", pods=1)),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            result = go_contract.volcano_predicate_v110(resp.read())
        assert not result.passed
        assert "psiIoSomeAvg10=61.2" in result.reason
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as resp:
            assert resp.status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err


def test_bad_config_exits_2_naming_the_key(tmp_path):
    config = tmp_path / "extender.yaml"
    config.write_text("crStatusTTLSeconds: thirty\n")
    proc = subprocess.run(
        [sys.executable, "-m", "mco_py.cli", "extender", "--config", str(config)],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "crStatusTTLSeconds" in proc.stderr
    assert str(config) in proc.stderr
