"""Collector cost benchmark (not part of `make test`; run as root: needs eBPF).

1. `mco collector` (eBPF backend, 1 s interval, exporter only) and Debian's
   prometheus-node-exporter side by side for DURATION seconds, both scraped
   every second (--scrape-every: Prometheus' 15 s, say): CPU % of one core, CPU ms per
   sample/scrape, RSS.
2. Overhead per block request under an O_DIRECT write load: no tracing vs the
   CO-RE eBPF backend vs the tracefs backend (system-wide busy CPU per request
   from /proc/stat, BPF program run time from kernel.bpf_stats_enabled, and the
   collector process's own CPU per request for tracefs parsing).

Usage: .venv/bin/python bench/collector/bench_collector.py [--duration 60] [--requests 20000] [--scrape-every 1]
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mco_py.collector.biolatency import BioConfig, BioLatencySource  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` (includes threads that already exited, e.g. per-scrape HTTP threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class CpuAccount:
    """Exact CPU time of a process and all its threads (exited ones too) from a cgroup-v1 cpuacct group.

    utime + stime in /proc/<pid>/stat are charged in whole ticks to whatever runs when the
    tick fires, which misjudges a process that wakes briefly many times a second; the
    cpuacct counter is nanosecond-exact. None of this when the controller is not mounted.
    """

    ROOT = Path("/sys/fs/cgroup/cpuacct")

    def __init__(self, name: str, pid: int) -> None:
        self.path: Path | None = None
        if not (self.ROOT / "cgroup.procs").exists():
            return
        path = self.ROOT / f"mco-bench-{name}-{os.getpid()}"
        path.mkdir(exist_ok=True)
        (path / "cgroup.procs").write_text(str(pid))
        self.path = path

    def seconds(self) -> float | None:
        return int((self.path / "cpuacct.usage").read_text()) / 1e9 if self.path else None

    def close(self) -> None:
        """Remove the group (call after the process exited: an empty group can go)."""
        if self.path is not None:
            self.path.rmdir()


def _minus(now: float | None, then: float | None) -> float:
    return now - then if now is not None and then is not None else float("nan")


def proc_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def side_by_side(duration: float, flush: float | None = None, every: float = 1.0) -> dict[str, dict[str, float]]:  # noqa: PLR0915
    exporter = shutil.which("prometheus-node-exporter")
    if exporter is None:
        sys.exit("prometheus-node-exporter missing: apt-get install prometheus-node-exporter")
    ne_port = free_port()
    ne = subprocess.Popen(
        [exporter, f"--web.listen-address=127.0.0.1:{ne_port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    analyzer, analyzer_port = start_sink()
    mco = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mco_py.cli",
            "collector",
            "--stream-analyzers",
            f"127.0.0.1:{analyzer_port}",
            "--bio-backend",
            "libbpf",
            "--interval",
            "1",
            "--metrics-host",
            "127.0.0.1",
            "--metrics-port",
            "0",
            *(["--stream-flush-interval", f"{flush:g}"] if flush is not None else []),
        ],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    accounts: dict[str, CpuAccount] = {}
    try:
        assert mco.stderr is not None
        port = 0
        while not port:
            line = mco.stderr.readline()
            if not line:
                sys.exit("collector exited early")
            match = re.search(r"metrics on 127\.0\.0\.1:(\d+)/metrics", line)
            port = int(match.group(1)) if match else 0
        threading.Thread(target=mco.stderr.read, daemon=True).start()  # keep the pipe drained
        mco_url, ne_url = f"http://127.0.0.1:{port}/metrics", f"http://127.0.0.1:{ne_port}/metrics"
        for _ in range(50):
            try:
                scrape(ne_url)
                break
            except OSError:
                time.sleep(0.1)
        accounts.update(mco=CpuAccount("mco", mco.pid), ne=CpuAccount("ne", ne.pid))
        time.sleep(3)  # warm-up: imports done, BPF loaded, first samples taken
        text = scrape(mco_url)
        assert 'backend="libbpf"' in text, "eBPF backend not in use; run as root after `make -C bpf`"
        start_samples = metric(text, "mco_collector_samples_total")
        start = time.monotonic()
        cpu0 = {"mco": proc_cpu_s(mco.pid), "ne": proc_cpu_s(ne.pid)}
        exact0 = {k: a.seconds() for k, a in accounts.items()}
        rss_max = {"mco": 0.0, "ne": 0.0}
        scrapes = 0
        next_tick = start
        while time.monotonic() - start < duration:
            scrape(mco_url)
            scrape(ne_url)
            scrapes += 1
            rss_max["mco"] = max(rss_max["mco"], proc_rss_mib(mco.pid))
            rss_max["ne"] = max(rss_max["ne"], proc_rss_mib(ne.pid))
            next_tick += every
            time.sleep(max(0.0, next_tick - time.monotonic()))
        wall = time.monotonic() - start
        cpu = {"mco": proc_cpu_s(mco.pid) - cpu0["mco"], "ne": proc_cpu_s(ne.pid) - cpu0["ne"]}
        exact = {k: _minus(a.seconds(), exact0[k]) for k, a in accounts.items()}
        samples = metric(scrape(mco_url), "mco_collector_samples_total") - start_samples
        duration_sum = metric(scrape(mco_url), "mco_collector_sample_duration_seconds_sum")
        duration_count = metric(scrape(mco_url), "mco_collector_sample_duration_seconds_count")
        streamed = metric(scrape(mco_url), f'mco_collector_samples_sent_total{{analyzer="127.0.0.1:{analyzer_port}"}}')
    finally:
        for p in (mco, ne):
            p.terminate()
            p.wait(timeout=15)
        for account in accounts.values():
            account.close()
        analyzer.stop(None)
    flush_text = "default" if flush is None else f"{flush:g} s"
    return {
        f"mco collector (libbpf, 1 s, streaming with flush {flush_text}, scraped every {every:g} s)": {
            "samples_acknowledged_by_analyzer": streamed,
            "wall_s": wall,
            "cpu_percent_of_one_core": 100 * exact["mco"] / wall,
            "cpu_percent_by_ticks": 100 * cpu["mco"] / wall,
            "cpu_ms_per_sample": 1000 * exact["mco"] / max(samples, 1),
            "sample_duration_ms_mean": 1000 * duration_sum / max(duration_count, 1),
            "samples": samples,
            "rss_mib_max": rss_max["mco"],
        },
        f"prometheus-node-exporter (scraped every {every:g} s)": {
            "wall_s": wall,
            "cpu_percent_of_one_core": 100 * exact["ne"] / wall,
            "cpu_percent_by_ticks": 100 * cpu["ne"] / wall,
            "cpu_ms_per_scrape": 1000 * exact["ne"] / max(scrapes, 1),
            "scrapes": scrapes,
            "rss_mib_max": rss_max["ne"],
        },
    }


def start_sink() -> tuple[Any, int]:
    """A minimal analyzer in this process that acknowledges every batch and, as the real one does, first
    sends the default rules' warn values (so the collector checks every sample against them)."""
    from concurrent import futures

    import grpc

    from mco_py.analysis.rules import default_rules
    from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb
    from mco_py.rpc.analyzer.v1 import analyzer_pb2_grpc as pb_grpc

    above = {name: rule.warn for name, rule in default_rules().signals.items()}

    class Sink(pb_grpc.AnalyzerServicer):
        def StreamSamples(self, request_iterator, context):  # type: ignore[no-untyped-def]
            yield pb.Control(send_early=pb.SendEarly(above=above))
            for batch in request_iterator:
                yield pb.Control(ack=pb.Ack(sequence=batch.sequence, accepted=len(batch.samples)))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_AnalyzerServicer_to_server(Sink(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def busy_jiffies() -> int:
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return sum(fields) - fields[3] - fields[4]  # minus idle and iowait


def direct_writes(count: int) -> None:
    buf = mmap.mmap(-1, 4096)
    buf.write(os.urandom(4096))
    handle, name = tempfile.mkstemp(prefix="mco-bench-", dir="/var/tmp")
    os.close(handle)
    fd = os.open(name, os.O_WRONLY | os.O_DIRECT)
    try:
        for i in range(count):
            os.pwrite(fd, buf, (i % 256) * 4096)
    finally:
        os.close(fd)
        os.unlink(name)


def bpf_run_ns() -> tuple[int, int]:
    """Sum of run_time_ns and run_cnt of the mco_rq_* programs this process holds."""
    ids: set[int] = set()
    for info in Path("/proc/self/fdinfo").iterdir():
        try:
            ids.update(int(x.split()[1]) for x in info.read_text().splitlines() if x.startswith("prog_id:"))
        except OSError:
            continue
    progs = json.loads(
        subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True).stdout
    )
    ours = [p for p in progs if p.get("id") in ids and str(p.get("name", "")).startswith("mco_rq_")]
    return sum(p.get("run_time_ns", 0) for p in ours), sum(p.get("run_cnt", 0) for p in ours)


def per_request(requests: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    stats = Path("/proc/sys/kernel/bpf_stats_enabled")
    old_stats = stats.read_text().strip()
    for mode in ("none", "libbpf", "tracefs"):
        source = None
        if mode != "none":
            source = BioLatencySource(
                BioConfig(backend=mode),
                proc_root=Path("/proc"),
                sys_root=Path("/sys"),
                tracefs_root=Path("/sys/kernel/tracing"),
            )
            assert source.backend == mode, source.failures
            source.read(0.0)
        stats.write_text("1")
        try:
            direct_writes(500)  # warm-up
            if source is not None:
                source.read(0.5)
            bpf0 = bpf_run_ns()
            jiffies0, self0 = busy_jiffies(), time.process_time()
            start = time.monotonic()
            direct_writes(requests)
            wall = time.monotonic() - start
            if mode == "tracefs":
                time.sleep(1.0)  # let the reader drain trace_pipe (its CPU is counted below)
            busy = (busy_jiffies() - jiffies0) / CLK_TCK
            own = time.process_time() - self0
            bpf1 = bpf_run_ns()
            p99 = None
            if source is not None:
                reading = next(r for r in source.read(1.0) if r.name == "bioLatencyP99Ms" and not r.device)
                p99 = reading.value
        finally:
            stats.write_text(old_stats)
            if source is not None:
                source.close()
        out[mode] = {
            "requests": requests,
            "wall_us_per_request": 1e6 * wall / requests,
            "system_busy_cpu_us_per_request": 1e6 * busy / requests,
            "process_cpu_us_per_request": 1e6 * own / requests,
            "bpf_prog_ns_per_request": (bpf1[0] - bpf0[0]) / requests if mode == "libbpf" else 0.0,
            "bpf_prog_runs_per_request": (bpf1[1] - bpf0[1]) / requests if mode == "libbpf" else 0.0,
            "p99_ms": p99 if p99 is not None else float("nan"),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--flush", type=float, help="collector --stream-flush-interval (default: the collector's, 5 s)")
    parser.add_argument(
        "--scrape-every", type=float, default=1.0, help="seconds between scrapes (default 1; Prometheus: 15-30)"
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (eBPF, tracefs)")
    print(f"host: {os.uname().release}, {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    print(f"\n== side by side, {args.duration:.0f} s ==")
    for name, figures in side_by_side(args.duration, args.flush, args.scrape_every).items():
        print(name)
        for key, value in figures.items():
            print(f"  {key:32} {value:10.3f}")
    print(f"\n== block request overhead, {args.requests} O_DIRECT 4 KiB writes ==")
    for mode, figures in per_request(args.requests).items():
        print(mode)
        for key, value in figures.items():
            print(f"  {key:32} {value:10.3f}")


if __name__ == "__main__":
    main()
