"""``mco collector`` end to end: settings layers, --once JSON, signals and clean shutdown."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from mco_py.errors import ConfigError
from mco_py.model import CLASS_SIGNALS, SIGNAL_NAMES
from tests.config.settings import collector_settings

from .conftest import is_root

MCO = [sys.executable, "-m", "mco_py.cli", "collector"]


def test_settings_layers(tmp_path: Path) -> None:
    text = "interval: 2\nstream: {analyzers: [a:9876]}\nbioBackend: tracefs\nnodeName: from-file\n"
    settings = collector_settings(
        text,
        env={"NODE_NAME": "from-env", "MCO_COLLECTOR_METRICS_PORT": "9999", "MCO_COLLECTOR_BIO_BACKEND": "diskstats"},
        flags={"bioBackend": "libbpf", "stream.analyzers": ["b:1", "c:2"]},
    )
    assert settings.node_name == "from-env"
    assert settings.interval == 2.0
    assert settings.metrics_port == 9999
    assert settings.bio_backend == "libbpf"
    assert settings.stream.analyzers == ("b:1", "c:2")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": "bioBackend: magic\nstream: {enabled: false}\n"}, "collector.yaml: bioBackend: expected one of"),
        ({"text": "intervl: 1\nstream: {enabled: false}\n"}, "intervl: unknown key; did you mean 'interval'?"),
        ({"text": "[1, 2]"}, "expected a mapping"),
        ({"text": "stream: {enabled: true}\n"}, "stream.analyzers: no analyzer address"),
        ({"text": "stream: {analyzers: [nohost]}\n"}, "'nohost' is not host:port"),
        (
            {"env": {"MCO_COLLECTOR_INTERVAL": "soon"}, "flags": {"stream.enabled": False}},
            "environment MCO_COLLECTOR_INTERVAL: interval: expected float, got str 'soon'",
        ),
        ({"flags": {"stream.enabled": False, "interval": 0.0}}, "--interval: interval: expected float >= 0.1"),
        ({"flags": {"stream.enabled": False, "stream.tlsCert": "/c"}}, "stream.tlsCert: tlsCert and tlsKey go"),
    ],
)
def test_bad_settings_name_the_problem(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        collector_settings(**kwargs)  # type: ignore[arg-type]


def test_once_json_has_every_report_signal(host_tree: Path) -> None:
    result = subprocess.run(
        [
            *MCO,
            "--once",
            "-o",
            "json",
            "--interval",
            "0.2",
            "--node-name",
            "node-a",
            "--proc-root",
            str(host_tree / "proc"),
            "--sys-root",
            str(host_tree / "sys"),
            "--bio-backend",
            "diskstats",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    sample = json.loads(result.stdout)
    assert sample["node"] == "node-a"
    assert sample["backends"]["bio"] == "diskstats-average"
    signals = {s["name"]: s for s in sample["signals"] if "device" not in s}
    for name in SIGNAL_NAMES:
        if name in CLASS_SIGNALS:
            assert name not in signals, "only with workload classes configured"
            continue
        assert name in signals, name
        entry = signals[name]
        assert ("value" in entry) != ("absent" in entry)
        assert entry["backend"]
        if "absent" in entry:
            assert entry["absent"]["reason"]
    assert signals["psiIoSomeAvg10"]["value"] >= 0
    assert signals["bioLatencyP99Ms"]["absent"]["kind"] == "unsupported"
    assert "average" in signals["bioLatencyP99Ms"]["absent"]["reason"]
    assert "perf_event_open" in signals["llcMissRate"]["absent"]["reason"] or "value" in signals["llcMissRate"]


def test_bad_flag_value_exits_2() -> None:
    result = subprocess.run(
        [*MCO, "--interval", "0", "--no-stream-enabled"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2
    assert "--interval: interval: expected float >= 0.1, got '0'" in result.stderr


@pytest.mark.root
@pytest.mark.skipif(not is_root(), reason="eBPF and tracefs need root")
@pytest.mark.parametrize("backend", ["libbpf", "tracefs"])
def test_sigterm_cleans_up(backend: str) -> None:
    proc = subprocess.Popen(
        [
            *MCO,
            "--no-stream-enabled",
            "--metrics-host",
            "127.0.0.1",
            "--metrics-port",
            "0",
            "--interval",
            "0.2",
            "--bio-backend",
            backend,
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        port = 0
        deadline = time.monotonic() + 30
        while not port:
            line = proc.stderr.readline()
            assert line, "collector exited early"
            assert time.monotonic() < deadline
            match = re.search(r"metrics on 127\.0\.0\.1:(\d+)/metrics", line)
            if match:
                port = int(match.group(1))
        wanted = f'mco_collector_backend_info{{backend="{backend}",signal="bio"}} 1.0'
        text = ""
        while wanted not in text:  # until the first sample is taken
            assert time.monotonic() < deadline, text
            time.sleep(0.05)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                text = response.read().decode()
        instances = list(Path("/sys/kernel/tracing/instances").glob(f"mco-{proc.pid}-*"))
        assert len(instances) == (1 if backend == "tracefs" else 0)
        proc.send_signal(signal.SIGTERM)
        rest = proc.stderr.read()
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
    assert "collector stopped" in rest
    assert not any(p.exists() for p in instances)
    assert "Traceback" not in rest


def test_config_file_and_env(tmp_path: Path, host_tree: Path) -> None:
    config = tmp_path / "collector.yaml"
    config.write_text(f"procRoot: {host_tree / 'proc'}\nsysRoot: {host_tree / 'sys'}\nbioBackend: diskstats\n")
    env = {**os.environ, "NODE_NAME": "from-env", "MCO_COLLECTOR_INTERVAL": "0.1"}
    result = subprocess.run(
        [*MCO, "--config", str(config), "--once", "-o", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    sample = json.loads(result.stdout)
    assert sample["node"] == "from-env"
    assert sample["backends"]["bio"] == "diskstats-average"
    missing = subprocess.run(
        [*MCO, "--config", str(tmp_path / "nope.yaml"), "--once"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert missing.returncode == 2
    assert "nope.yaml: does not exist" in missing.stderr
