"""Benchmark of ``mco extender`` with realistic Volcano bodies (prints figures; not part of ``make test``).

Server pinned to CPU 0 (taskset), wrk and this script to CPU 1. Each round:

- predicate throughput with wrk, 16 connections, after a 2 s warm-up: a small node (~64 KiB body) and
  a node running 110 pods (~730 KiB, full Pods in ``Tasks``);
- single prioritize requests for 100 and 1,000 nodes (~7.5 MB and ~74 MB);
- server RSS (VmRSS and peak VmHWM).

Then an optional soak: mixed load for ``--soak`` seconds, RSS
sampled every 2 s; the verdict after ``--soak-warmup`` seconds is printed as
per-minute medians, the least-squares slope (MB/min) and the drift (median of
the last minute - of the first), plus RSS 15 s after the load stopped.
``--probe FILE`` runs the soak's server under memprobe.py (heap, GC, smaps).

``--web tls`` serves HTTPS (a throwaway CA and server certificate), ``--web tls-auth`` HTTPS and
basic auth (a bcrypt hash of cost 10; the clients send the header on every request, as the
schedulers do): the port's cost of TLS and authentication against ``--web plain``.

Usage: .venv/bin/python bench/extender/run.py [--rounds 3] [--duration 10] [--soak 300] [--soak-only]
                                              [--web plain|tls|tls-auth]
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import re
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mco_py.model import Level, NodeAssessment, Report  # noqa: E402
from mco_py.obs.http_app import Request  # noqa: E402
from mco_py.store.file import FileReportStore  # noqa: E402
from tests.extender import bodies  # noqa: E402

LUA = Path(__file__).with_name("post.lua")
WEB = {"scheme": "http", "authorization": "", "ca": ""}
"""How the clients reach the server (--web): the URL scheme, the Authorization header and the CA file ("" = none)."""


def web_config(workdir: Path, mode: str) -> str:
    """The ``web:`` section of the server's settings for ``mode``; sets :data:`WEB` for the clients."""
    if mode == "plain":
        return ""
    import bcrypt

    from tests.analyzer.certs import TestCA

    ca = TestCA(workdir)
    WEB["ca"] = str(ca.path)
    issued = ca.issue("server", "localhost", ["localhost"], server=True, ips=["127.0.0.1"])
    WEB["scheme"] = "https"
    text = f"web:\n  tls: {{certFile: {issued.cert}, keyFile: {issued.key}}}\n"
    if mode == "tls-auth":
        hashed = bcrypt.hashpw(b"bench-password", bcrypt.gensalt(rounds=10)).decode()
        WEB["authorization"] = "Basic " + base64.b64encode(b"volcano:bench-password").decode()
        text += f"  basicAuthUsers: {{volcano: '{hashed}'}}\n"
    return text


def _connection(port: int) -> http.client.HTTPConnection:
    if WEB["scheme"] == "https":
        context = ssl.create_default_context(cafile=WEB["ca"])
        return http.client.HTTPSConnection("127.0.0.1", port, timeout=120, context=context)
    return http.client.HTTPConnection("127.0.0.1", port, timeout=120)


def generate(workdir: Path, nodes_1000: bool) -> dict[str, Path]:
    out = {}
    docs = {
        "predicate-64k": lambda: bodies.dumps(bodies.predicate_body("worker-7", pods=7)),
        "predicate-730k": lambda: bodies.dumps(bodies.predicate_body("worker-7", pods=104)),
        "prioritize-100": lambda: bodies.prioritize_bytes(100, pods=10),
    }
    if nodes_1000:
        docs["prioritize-1000"] = lambda: bodies.prioritize_bytes(1000, pods=10)
    for name, make in docs.items():
        path = workdir / f"{name}.json"
        path.write_bytes(make())
        out[name] = path
        print(f"body {name}: {path.stat().st_size / 1024:.0f} KiB", flush=True)
    return out


def write_report(path: Path) -> None:
    nodes = []
    for i in range(1000):
        level = (Level.NONE, Level.LOW, Level.MEDIUM, Level.HIGH)[i % 4]
        nodes.append(NodeAssessment(f"worker-{i}", level, 20.0 * (i % 4) + 3, {"psiIoSomeAvg10": float(i % 30)}))
    FileReportStore(path).write(Report(time.time(), "bench", "1", tuple(nodes)))


def start_server(config: Path, probe: Path | None = None) -> tuple[subprocess.Popen[str], int]:
    # With ``probe``, bench/extender/memprobe.py runs the same CLI with a memory sampler thread.
    launcher = [str(Path(__file__).with_name("memprobe.py")), str(probe)] if probe else ["-m", "mco_py.cli"]
    cmd = [
        "taskset",
        "-c",
        "0",
        sys.executable,
        *launcher,
        "extender",
        "--config",
        str(config),
        "--listen",
        "127.0.0.1:0",
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    # --log-level warning hides the "listening" line: find the port from /proc instead.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        port = _listening_port(proc.pid)
        if port:
            return proc, port
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("server did not start: " + (proc.stderr.read() if proc.stderr else ""))


def _listening_port(pid: int) -> int | None:
    try:
        inodes = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    except OSError:
        return None
    socks = {s[8:-1] for s in inodes if s.startswith("socket:[")}
    with open("/proc/net/tcp") as fh:
        for line in fh.readlines()[1:]:
            parts = line.split()
            if parts[3] == "0A" and parts[9] in socks:  # LISTEN
                return int(parts[1].split(":")[1], 16)
    return None


def rss_mb(pid: int) -> tuple[float, float]:
    text = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", text).group(1)) / 1024  # type: ignore[union-attr]
    hwm = int(re.search(r"VmHWM:\s+(\d+)", text).group(1)) / 1024  # type: ignore[union-attr]
    return rss, hwm


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


LAST_CPU_PER_REQUEST: list[float] = []
LAST_SYS_PER_REQUEST: list[float] = []
LAST_CPU0_STEAL: list[float] = []


def cpu0_ticks() -> tuple[int, int]:
    """(steal, total) clock ticks of CPU 0, where the server runs: the hypervisor's share shows as steal."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu0 "):
            fields = [int(x) for x in line.split()[1:]]
            return fields[7], sum(fields[:8])
    return 0, 0


def wrk(
    port: int, body: Path, path: str, duration: int, *, connections: int = 16, pid: int | None = None
) -> tuple[float, float, float]:
    """Requests/s, p50 ms, p99 ms; with ``pid``, also appends the server's CPU µs per request."""
    cmd = [
        "taskset",
        "-c",
        "1",
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{duration}s",
        "--latency",
        "-s",
        str(LUA),
        f"{WEB['scheme']}://127.0.0.1:{port}{path}",
    ]
    user_before, sys_before = cpu_seconds(pid) if pid else (0.0, 0.0)
    steal_before, total_before = cpu0_ticks()
    out = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env={**os.environ, "BODY_FILE": str(body), "AUTHORIZATION": WEB["authorization"]},
        check=True,
        timeout=duration + 60,
    ).stdout
    if pid:
        total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
        user, system = cpu_seconds(pid)
        LAST_CPU_PER_REQUEST.append((user + system - user_before - sys_before) / max(1, total) * 1e6)
        LAST_SYS_PER_REQUEST.append((system - sys_before) / max(1, total) * 1e6)
        steal, ticks = cpu0_ticks()
        LAST_CPU0_STEAL.append(100 * (steal - steal_before) / max(1, ticks - total_before))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        raise SystemExit(f"wrk saw {non2xx.group(1)} non-2xx replies:\n{out}")
    return rps, _latency(out, "50%"), _latency(out, "99%")


def _latency(out: str, pct: str) -> float:
    m = re.search(rf"{re.escape(pct)}\s+([\d.]+)(us|ms|s)\b", out)
    if not m:
        return float("nan")
    value, unit = float(m.group(1)), m.group(2)
    return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value


def single(port: int, body: bytes, path: str, repeat: int) -> float:
    """Median wall time (ms) of one request on a kept-alive connection."""
    times = []
    conn = _connection(port)
    headers = {"Content-Type": "application/json"}
    if WEB["authorization"]:
        headers["Authorization"] = WEB["authorization"]
    for _ in range(repeat):
        start = time.perf_counter()
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        times.append((time.perf_counter() - start) * 1000)
        assert resp.status == 200, resp.status
        scores = json.loads(data)["nodeScore"]
        assert len(scores) >= 100, len(scores)
    conn.close()
    return statistics.median(times)


def one_round(config: Path, files: dict[str, Path], duration: int) -> dict[str, float]:
    proc, port = start_server(config)
    res: dict[str, float] = {}
    try:
        pred = "/volcano/v1.9/predicate"
        wrk(port, files["predicate-64k"], pred, 2)  # warm-up, not recorded: a scheduler's extender runs warm
        res["p64_rps"], res["p64_p50"], res["p64_p99"] = wrk(port, files["predicate-64k"], pred, duration, pid=proc.pid)
        res["p64_cpu_us"] = LAST_CPU_PER_REQUEST[-1]
        res["p64_sys_us"] = LAST_SYS_PER_REQUEST[-1]
        res["p64_cpu0_steal_pct"] = LAST_CPU0_STEAL[-1]
        res["p730_rps"], res["p730_p50"], res["p730_p99"] = wrk(
            port, files["predicate-730k"], pred, duration, pid=proc.pid
        )
        res["p730_cpu_us"] = LAST_CPU_PER_REQUEST[-1]
        res["p730_sys_us"] = LAST_SYS_PER_REQUEST[-1]
        res["prio100_ms"] = single(port, files["prioritize-100"].read_bytes(), "/volcano/prioritize", 7)
        if "prioritize-1000" in files:
            big = files["prioritize-1000"].read_bytes()
            res["prio1000_ms"] = single(port, big, "/volcano/prioritize", 3)
            del big
        res["rss_mb"], res["hwm_mb"] = rss_mb(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return res


def inprocess(report: Path, files: dict[str, Path]) -> None:
    """CPU cost of decode + policy + reply per request, no HTTP (less sensitive to a shared machine)."""
    from prometheus_client import CollectorRegistry

    from mco_py.analysis.policy import PolicySettings
    from mco_py.extender.app import ExtenderApp
    from mco_py.extender.source import FileReportSource, NoLabels
    from mco_py.extender.wire import MsgspecDecoder

    os.sched_setaffinity(0, {0})
    print("\nin-process handle() cost per request (median ms, pinned to CPU 0, no HTTP):")
    plan = {
        "predicate-64k": ("/volcano/v1.9/predicate", 300),
        "predicate-730k": ("/volcano/v1.9/predicate", 40),
        "prioritize-100": ("/volcano/prioritize", 7),
        "prioritize-1000": ("/volcano/prioritize", 3),
    }
    app = ExtenderApp(
        policy=PolicySettings(ttl_seconds=86400),
        source=FileReportSource(report, recheck_seconds=0.05),
        labels=NoLabels(),
        decoder=MsgspecDecoder(),
        registry=CollectorRegistry(),
    )
    for name, (path, repeat) in plan.items():
        if name not in files:
            continue
        body = files[name].read_bytes()
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            resp = app.handle(Request("POST", path, body))
            times.append((time.perf_counter() - start) * 1000)
            assert resp.status == 200
        print(f"  {name:16s} {statistics.median(times):9.3f} ms")
        del body
    os.sched_setaffinity(0, {1})


def soak(config: Path, files: dict[str, Path], seconds: int, warmup: float, probe: Path | None) -> None:
    proc, port = start_server(config, probe)
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    start = time.monotonic()

    def prioritize_loop() -> None:
        body = files["prioritize-100"].read_bytes()
        while not stop.is_set():
            single(port, body, "/volcano/prioritize", 1)
            stop.wait(1.0)

    def rss_loop() -> None:  # every 2 s, whatever the load is doing (RSS saws with the server's heap trims)
        while not stop.wait(2.0):
            samples.append((time.monotonic() - start, rss_mb(proc.pid)[0]))

    threads = [threading.Thread(target=f, daemon=True) for f in (prioritize_loop, rss_loop)]
    for t in threads:
        t.start()
    rates = []
    try:
        while time.monotonic() - start < seconds:
            rates.append(wrk(port, files["predicate-730k"], "/volcano/v1.10/predicate", 10)[0])
            print(f"soak t={time.monotonic() - start:.0f}s rss={rss_mb(proc.pid)[0]:.1f} MB", flush=True)
        stop.set()
        for t in threads:
            t.join(10)
        time.sleep(15)  # the server trims its heap 10 s after the last large request
        idle = rss_mb(proc.pid)[0]
    finally:
        stop.set()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    print(soak_verdict(samples, seconds, warmup))
    print(f"soak RSS 15 s after the load stopped: {idle:.1f} MB")
    print(f"soak 730 KiB predicate req/s (median of the 10 s runs): {statistics.median(rates):.0f}")


def soak_verdict(samples: list[tuple[float, float]], seconds: int, warmup: float) -> str:
    """Per-minute RSS (median/max), the least-squares slope and the drift after ``warmup`` seconds."""
    after = [s for s in samples if s[0] >= warmup]
    if len(after) < 60:
        return f"soak {seconds}s: too few samples after the {warmup:.0f} s warm-up for a verdict"
    minutes: dict[int, list[float]] = {}
    for t, rss in samples:
        minutes.setdefault(int(t // 60), []).append(rss)
    lines = [
        f"  minute {m + 1}: RSS median {statistics.median(v):.1f} MB, min {min(v):.1f}, max {max(v):.1f}"
        for m, v in sorted(minutes.items())
    ]
    xs = [s[0] / 60 for s in after]
    ys = [s[1] for s in after]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    first = statistics.median(y for x, y in zip(xs, ys, strict=True) if x < xs[0] + 1)
    last = statistics.median(y for x, y in zip(xs, ys, strict=True) if x > xs[-1] - 1)
    lines.append(
        f"soak {seconds}s, after the {warmup:.0f} s warm-up ({len(after)} RSS samples, every 2 s): "
        f"slope {slope:+.3f} MB/min (least squares), drift {last - first:+.1f} MB (median of the last minute "
        f"{last:.1f} MB - of the first {first:.1f} MB), range {min(ys):.1f}-{max(ys):.1f} MB; "
        f"max overall {max(s[1] for s in samples):.1f} MB"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    parser.add_argument("--soak", type=int, default=0, help="soak seconds (0 = skip)")
    parser.add_argument("--soak-warmup", type=float, default=60, help="soak seconds left out of the verdict")
    parser.add_argument("--soak-only", action="store_true", help="skip the throughput rounds and the in-process costs")
    parser.add_argument(
        "--probe", type=Path, default=None, help="soak server writes memory figures here (JSON lines, memprobe.py)"
    )
    parser.add_argument("--no-1000", action="store_true", help="skip the 74 MB prioritize")
    parser.add_argument("--web", choices=("plain", "tls", "tls-auth"), default="plain", help="HTTPS, basic auth")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    os.sched_setaffinity(0, {1})
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="mco-bench-"))
    try:
        files = generate(workdir, not args.no_1000)
        report = workdir / "report.json"
        write_report(report)
        config = workdir / "extender.yaml"
        config.write_text(f"reportFile: {report}\ncrStatusTTLSeconds: 86400\n" + web_config(workdir, args.web))
        rows: list[dict[str, float]] = []
        for r in range(0 if args.soak_only else args.rounds):
            res = one_round(config, files, args.duration)
            rows.append(res)
            print(f"round {r + 1}: " + ", ".join(f"{k}={v:.1f}" for k, v in res.items()), flush=True)
        if not args.soak_only:
            summary(rows)
            inprocess(report, files)
        if args.soak:
            soak(config, files, args.soak, args.soak_warmup, args.probe)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def summary(rows: list[dict[str, float]]) -> None:
    print("\nsummary (min-max over rounds):")
    for key in rows[0]:
        values = [row[key] for row in rows if key in row]
        print(f"  {key:12s} {min(values):10.1f} - {max(values):10.1f}")
    print(f"load average after the HTTP rounds: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
