"""`mco doctor` on a host running the three parts (real processes from their configuration
files, loopback ports), then with each part broken: it must name that exact cause."""

from __future__ import annotations

import contextlib
import json
import socket
import stat
import subprocess
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mco_py.analysis.rules import default_rules_text
from mco_py.doctor.checks import Check, PartView, Verdict, judge
from mco_py.doctor.main import redact
from mco_py.doctor.probe import is_part, probe_host
from tests.mco_host import MCO, PARTS, Host, running_host

Checks = dict[str, dict[str, str]]


class DoctorHost(Host):
    """The running parts, and ``mco doctor`` pointed at their configuration."""

    def doctor(self, *args: str) -> tuple[int, dict[str, Any]]:
        out = subprocess.run(
            [*MCO, "doctor", "--config-dir", str(self.etc), "--log-dir", str(self.etc), "-o", "json", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return out.returncode, json.loads(out.stdout)

    def until(self, cond: Callable[[Checks], bool], what: str, timeout: float = 30) -> dict[str, Any]:
        """Run doctor until ``cond`` holds on its checks by name; the last document."""
        deadline = time.monotonic() + timeout
        while True:
            rc, doc = self.doctor()
            checks = {c["name"]: c for c in doc["checks"]}
            with contextlib.suppress(KeyError):  # a check not there yet (a part still starting)
                if cond(checks):
                    return {"rc": rc, **doc, "by_name": checks}
            assert time.monotonic() < deadline, f"doctor never saw {what}: {json.dumps(doc, indent=1)}"
            time.sleep(0.3)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[DoctorHost]:
    with running_host(tmp_path) as running:
        yield DoctorHost(running.etc, running.rules, running.ports, running.procs)


@pytest.mark.timeout(400)  # four waits of up to 30-40 s each on a busy machine
def test_a_healthy_host_passes_then_each_broken_part_is_named(host: Host) -> None:
    healthy = host.until(lambda c: all(x["verdict"] == "ok" for x in c.values()), "every check ok")
    assert healthy["rc"] == 0
    assert set(healthy["by_name"]) == {
        *(f"{part} {what}" for part in PARTS for what in ("process", "port", "metrics")),
        "collector signals",
        "collector stream",
        "collector stream auth",
        "analyzer stream auth",
        "analyzer leader",
        "analyzer collectors",
        "analyzer rules",
        "analyzer report",
        "extender ready",
        "extender mode",
    }
    assert "report mode" in healthy["by_name"]["extender mode"]["detail"]
    assert "llcMissRate (disabled)" in healthy["by_name"]["collector signals"]["detail"]
    assert healthy["by_name"]["analyzer stream auth"]["detail"] == "loopback only (plaintext, no client identity)"

    # corrupt rules: the analyzer keeps its rules and says so; doctor warns
    host.rules.write_text("version: [broken\n")
    rules = host.until(lambda c: c["analyzer rules"]["verdict"] == "warn", "the rejected rules")
    assert rules["rc"] == 1
    assert "the document in place is invalid and refused" in rules["by_name"]["analyzer rules"]["detail"]
    assert "mco rules validate" in rules["by_name"]["analyzer rules"]["nextStep"]
    # fixed: ok again at once, and it remembers the refusal
    host.rules.write_text(default_rules_text())
    fixed = host.until(lambda c: c["analyzer rules"]["verdict"] == "ok", "the fixed rules")
    assert "refused earlier; fixed since" in fixed["by_name"]["analyzer rules"]["detail"]

    # the analyzer stops: its process and port are gone, the collector loses its stream and
    # the extender falls back once the report is older than its TTL (2 s)
    host.stop("analyzer")
    down = host.until(lambda c: c["extender mode"]["verdict"] == "fail", "the stale report", timeout=40)
    assert down["rc"] == 2
    by_name = down["by_name"]
    assert by_name["analyzer process"]["verdict"] == "fail"
    assert by_name["analyzer metrics"]["verdict"] == "fail"
    assert by_name["collector stream"]["verdict"] == "fail"
    assert f"127.0.0.1:{host.ports['grpc']}" in by_name["collector stream"]["detail"]
    assert "basic mode (stale)" in by_name["extender mode"]["detail"]
    assert "is the analyzer running" in by_name["extender mode"]["nextStep"]

    # another program takes the analyzer's port
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # its connections may be in TIME_WAIT
        squatter.bind(("127.0.0.1", host.ports["analyzer"]))
        squatter.listen()
        blocked = host.until(lambda c: "not by this mco analyzer" in c["analyzer port"]["detail"], "the squatter")
    assert blocked["by_name"]["analyzer port"]["verdict"] == "fail"
    assert "pid " in blocked["by_name"]["analyzer port"]["detail"]


def test_the_bundle_holds_the_checks_configs_metrics_and_logs(host: Host, tmp_path: Path) -> None:
    host.until(lambda c: c["collector stream"]["verdict"] == "ok", "the collector streaming")
    bundle = tmp_path / "bundle.tar.gz"
    rc, doc = host.doctor("--bundle", str(bundle))
    assert rc in (0, 1), doc
    with tarfile.open(bundle) as tar:
        names = {Path(*Path(name).parts[1:]).as_posix() for name in tar.getnames()}
        member = next(m for m in tar.getmembers() if m.name.endswith("doctor.json"))
        extracted = tar.extractfile(member)
        assert extracted is not None
        assert json.loads(extracted.read())["checks"] == doc["checks"]
    assert {"doctor.json", "config/collector.yaml", "config/analyzer.yaml", "config/extender.yaml"} <= names
    assert {"metrics/collector.txt", "metrics/analyzer.txt", "metrics/extender.txt"} <= names
    assert {"logs/collector.log", "logs/analyzer.log", "logs/extender.log"} <= names


def test_secrets_are_redacted_from_configs() -> None:
    text = "token: abc123\ntoken_file: /etc/mco/token\n  apiPassword: 'x y'\nsecret:\nlisten: ':9879'\n"
    assert redact(text) == (
        'token: "<redacted>"\ntoken_file: /etc/mco/token\n  apiPassword: "<redacted>"\nsecret:\nlisten: \':9879\'\n'
    )


def test_no_configuration_and_an_unreadable_metrics_endpoint() -> None:
    (nothing,) = judge([])
    assert nothing.verdict is Verdict.FAIL
    assert "make run" in nothing.next_step
    assert "/etc/mco/collector.yaml" in nothing.detail
    (elsewhere,) = judge([], Path("/srv/mco/etc"))
    assert "(/srv/mco/etc/collector.yaml, analyzer.yaml or extender.yaml)" in elsewhere.detail
    checks = {c.name: c for c in judge([PartView("collector", 9877, metrics_error="connection refused")])}
    assert checks["collector process"].verdict is Verdict.FAIL
    assert "systemctl status mco-collector" in checks["collector process"].next_step
    assert checks["collector port"].detail == "nothing listens on 9877/tcp"
    assert "connection refused" in checks["collector metrics"].detail
    assert "collector stream" not in checks  # nothing to judge without its metrics


def test_a_missing_config_dir_fails_with_what_to_do(tmp_path: Path) -> None:
    command = [*MCO, "doctor", "--config-dir", str(tmp_path / "none")]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert "no MCO configuration found" in out.stdout
    assert out.stdout.splitlines()[-1] == "verdict: fail (0 ok, 0 warn, 1 fail)"


class _Proc:
    def __init__(self, *cmdline: str) -> None:
        self._cmdline = list(cmdline)

    def cmdline(self) -> list[str]:
        return self._cmdline


def test_a_part_is_the_process_of_its_configuration_file(tmp_path: Path) -> None:
    """Another MCO on the same host (another --config) is not the part checked."""
    mine = tmp_path / "analyzer.yaml"
    assert is_part(
        _Proc("/opt/mco/venv/bin/python", "/opt/mco/venv/bin/mco", "analyzer", "--config", str(mine)), "analyzer", mine
    )
    assert is_part(_Proc("python", "-m", "mco_py.cli", "analyzer", f"--config={mine}"), "analyzer", mine)
    assert not is_part(_Proc("mco", "analyzer", "--config", "/etc/mco/analyzer.yaml"), "analyzer", mine)
    assert is_part(_Proc("mco", "analyzer"), "analyzer", Path("/etc/mco/analyzer.yaml"))  # the default file
    assert not is_part(_Proc("mco", "collector", "--config", str(mine)), "analyzer", mine)
    assert not is_part(_Proc("vim", "analyzer", "--config", str(mine)), "analyzer", mine)


BUILD = 'mco_build_info{component="analyzer",python="3.11",version="0.1.0"} 1.0\n'


def _by_name(views: list[PartView]) -> dict[str, Check]:
    return {c.name: c for c in judge(views)}


def test_metrics_are_judged_only_when_they_are_the_parts() -> None:
    healthy = BUILD + "mco_analyzer_leader 1.0\nmco_analyzer_connected_collectors 2.0\n"
    # not root: the owner is hidden, the metrics say which part they are
    hidden = _by_name([PartView("analyzer", 9878, process="pid 1", port_owner_hidden=True, metrics=healthy)])
    assert hidden["analyzer port"].verdict is Verdict.OK
    assert hidden["analyzer leader"].verdict is Verdict.OK
    unknown = _by_name([PartView("analyzer", 9878, port_owner_hidden=True, metrics="# nothing\n")])
    assert unknown["analyzer port"].verdict is Verdict.WARN
    assert "as root" in unknown["analyzer port"].next_step
    assert "analyzer leader" not in unknown
    # another exporter holds the port: its numbers are not the analyzer's
    foreign = _by_name([PartView("analyzer", 9878, port_owner="pid 7 (node_exporter)", metrics="up 1\n")])
    assert foreign["analyzer metrics"].verdict is Verdict.FAIL
    assert "not as this mco analyzer" in foreign["analyzer metrics"].detail
    assert "analyzer leader" not in foreign
    # an HTML page on the port, and series without the labels they should have
    page = _by_name([PartView("analyzer", 9878, port_is_own=True, metrics="<html><body>hello</body></html>")])
    assert "is not Prometheus text" in page["analyzer metrics"].detail
    bare = "mco_collector_signal_absent 1.0\nmco_collector_stream_connected 0.0\nmco_collector_backend_info 1.0\n"
    collector = _by_name([PartView("collector", 9877, port_is_own=True, metrics=bare)])
    assert collector["collector stream"].detail == "not connected to ?"


def test_an_outdated_report_in_use_is_a_warning() -> None:
    metrics = (
        "mco_extender_basic_mode 0.0\nmco_extender_report_outdated_in_use 1.0\nmco_extender_report_age_seconds 90.0\n"
    )
    view = PartView(
        "extender", 9879, port_is_own=True, metrics=metrics, ready=(200, "ok"), settings={"crStatusTTLSeconds": 30}
    )
    mode = _by_name([view])["extender mode"]
    assert mode.verdict is Verdict.WARN
    assert "outdated report (fallbackWhenCROutdated is false); report age 90 s (TTL 30 s)" in mode.detail


def test_a_port_that_answers_without_http_is_named_not_a_crash(tmp_path: Path) -> None:
    with socket.socket() as banner:
        banner.bind(("127.0.0.1", 0))
        banner.listen()
        port = banner.getsockname()[1]

        def serve() -> None:
            conn, _ = banner.accept()
            with conn:
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

        threading.Thread(target=serve, daemon=True).start()
        (tmp_path / "collector.yaml").write_text(
            f"metrics_port: {port}\nmetricsHost: 127.0.0.1\nstream: {{enabled: false}}\n"
        )
        (tmp_path / "analyzer.yaml").write_bytes(b"identity: \xff\xfe\n")  # not UTF-8
        views, problems, notes = probe_host(tmp_path, timeout=2)
    view = next(v for v in views if v.part == "collector")
    assert view.metrics is None
    assert "not an HTTP answer" in view.metrics_error
    assert problems == [f"{tmp_path / 'analyzer.yaml'}: not UTF-8 text (invalid start byte at byte 10)"]
    assert notes == [f"{tmp_path / 'collector.yaml'}: old keys read: metrics_port → metricsPort; rename them "
                     "(docs: docs/collector.md#settings)"]  # fmt: skip


def test_the_bundle_is_private_and_reads_no_links(host: DoctorHost, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0\n")
    (host.etc / "stolen.log").symlink_to(secret)
    bundle = tmp_path / "bundle.tar.gz"
    host.doctor("--bundle", str(bundle))
    assert stat.S_IMODE(bundle.stat().st_mode) == 0o600
    with tarfile.open(bundle) as tar:
        assert not [name for name in tar.getnames() if name.endswith("stolen.log")]


AUTH_CASES = [
    ("analyzer", {"listen": ":9876", "tls_cert": True, "tls_ca": True}, Verdict.OK, "mutual TLS (client certificates)"),
    ("analyzer", {"listen": ":9876", "tls_cert": True, "token_file": True}, Verdict.OK, "TLS and a bearer token"),
    ("analyzer", {"listen": ":9876", "tls_cert": True}, Verdict.WARN, "TLS without client authentication"),
    ("analyzer", {"listen": ":9876", "token_file": True}, Verdict.WARN, "a bearer token in plaintext"),
    ("analyzer", {"listen": ":9876"}, Verdict.WARN, "plaintext and unauthenticated (mco_insecure_plaintext_grpc)"),
    ("analyzer", {"listen": "127.0.0.1:9876"}, Verdict.OK, "loopback only (plaintext"),
    ("analyzer", {"listen": "[::1]:9876"}, Verdict.OK, "loopback only (plaintext"),
    ("collector", {"stream": True, "analyzers": ["ctl:9876"], "tls_ca": True, "tls_cert": True}, Verdict.OK, "mutual"),
    ("collector", {"stream": True, "analyzers": ["ctl:9876"], "tls_ca": True}, Verdict.WARN, "TLS without client"),
    ("collector", {"stream": True, "analyzers": ["ctl:9876", "127.0.0.1:9876"]}, Verdict.WARN, "ctl:9876, 127.0.0.1"),
    ("collector", {"stream": True, "analyzers": ["localhost:9876"]}, Verdict.OK, "loopback only"),
]


@pytest.mark.parametrize(("part", "settings", "verdict", "says"), AUTH_CASES)
def test_stream_auth_is_judged_from_the_configuration(
    part: str, settings: dict[str, object], verdict: Verdict, says: str
) -> None:
    metrics = f'mco_build_info{{component="{part}",version="1",python="3"}} 1.0\n'
    view = PartView(part, 9877, process="pid 1", port_is_own=True, metrics=metrics, settings=settings)
    check = next(c for c in judge([view]) if c.name == f"{part} stream auth")
    assert check.verdict is verdict, check
    assert says in check.detail, check
    if verdict is Verdict.WARN:
        assert "mco_insecure_plaintext_grpc" in check.next_step


def test_an_exporter_only_collector_has_no_stream_to_judge() -> None:
    view = PartView("collector", 9877, process="pid 1", port_is_own=True, metrics="", settings={"stream": False})
    assert not [c for c in judge([view]) if c.name == "collector stream auth"]


@pytest.mark.parametrize(
    ("lines", "verdict", "says"),
    [
        ([], None, ""),
        (
            ['mco_guard_mode{mode="dry-run"} 1.0', "mco_guard_offline_cpu_limit_ratio 0.5"],
            Verdict.OK,
            "dry-run; offline CPU would be limited to 50% of the node",
        ),
        (
            ['mco_guard_mode{mode="on"} 1.0', "mco_guard_write_errors_total 2", "mco_guard_failing 0"],
            Verdict.OK,
            "on; offline CPU unlimited",
        ),
        (["mco_guard_offline_cpu_limit_ratio 0.25"], None, ""),
        (
            [
                'mco_guard_mode{mode="on"} 1.0',
                "mco_guard_offline_cpu_limit_ratio 0.25",
                "mco_guard_write_errors_total 3",
                "mco_guard_failing 1",
            ],
            Verdict.WARN,
            "on; offline CPU limited to 25% of the node; cgroup writes or restores fail (3 since the collector",
        ),
    ],
)
def test_the_collectors_guard_is_reported(lines: list[str], verdict: Verdict | None, says: str) -> None:
    metrics = "".join(
        line + "\n" for line in ['mco_build_info{component="collector",version="1",python="3"} 1.0', *lines]
    )
    view = PartView("collector", 9877, process="pid 1", port_is_own=True, metrics=metrics, settings={"stream": False})
    found = [c for c in judge([view]) if c.name == "collector guard"]
    if verdict is None:
        assert not found
    else:
        assert found[0].verdict is verdict
        assert says in found[0].detail
