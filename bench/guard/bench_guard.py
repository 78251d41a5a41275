"""The node guard's proof: an online service's latency with batch antagonists, guard on and off.

Not part of `make test`; run as root on a host with cgroup v1 `cpu` and the v2 tree at
/sys/fs/cgroup/unified (or pure v2), with Debian's redis-server and stress-ng
(`apt-get install redis-server stress-ng`).

- Online: redis-server in the group `mco-bench-guard/online`, driven at a fixed request rate
  (open loop: each PING is due at t0 + i/rate and its latency counts from that moment, so a
  stalled server cannot hide its tail by slowing the client) by a client in the same group.
- Offline: stress-ng in `mco-bench-guard/offline` (`--cpu`, `--cache`), its throughput from
  `--metrics-brief` (bogo ops/s, real time).
- Rounds, alternating: no antagonist, antagonist with the guard off, antagonist with the guard
  on (`mco collector` with `guard: on`, exporter only, 1 s interval); ROUNDS of each.

Prints p50/p99/p99.9 per round and condition, offline throughput, and the ratios the issue
asks for: p99 with the guard / p99 without antagonist (target <= 1.3), offline throughput with
the guard / without it (target >= 0.5).

Usage: .venv/bin/python bench/guard/bench_guard.py [--rounds 3] [--seconds 20] [--rate 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mco_py.collector.guard.files import detect_layout  # noqa: E402

NAME = "mco-bench-guard"
#: On the disk under test (not a tmpfs): redis's append-only file and stress-ng's files.
DISK_DIR = Path("/var/tmp/mco-bench-guard")
WARMUP_S = 3.0


class Groups:
    """``online`` and ``offline`` in every tree the guard reads or writes: the CPU, memory and
    blkio controllers' (one on cgroup v2) and the pressure tree."""

    def __init__(self) -> None:
        layout = detect_layout(Path("/sys/fs/cgroup"))
        roots = (layout.cpu_root, layout.memory_root, layout.io_root, layout.pressure_root)
        self.trees = [root / NAME for root in dict.fromkeys(r for r in roots if r is not None)]
        for tree in self.trees:
            for cls in ("online", "offline"):
                (tree / cls).mkdir(parents=True, exist_ok=True)

    def enter(self, cls: str) -> list[str]:
        """A shell prefix that moves itself into group ``cls`` of every tree, then execs the rest."""
        moves = "; ".join(f"echo $$ > {tree / cls / 'cgroup.procs'}" for tree in self.trees)
        return ["sh", "-c", f'{moves}; exec "$@"', "sh"]

    def remove(self) -> None:
        for tree in self.trees:
            for cls in ("online", "offline"):
                with contextlib.suppress(OSError):
                    (tree / cls).rmdir()
            with contextlib.suppress(OSError):
                tree.rmdir()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _drive(port: int, rate: float, seconds: float, connections: int, command: bytes = b"PING") -> list[float]:
    """Open-loop ``command`` s at ``rate``/s for ``seconds``: latencies (s) from each one's due time."""
    pairs = [await asyncio.open_connection("127.0.0.1", port) for _ in range(connections)]
    latencies: list[float] = []
    queues: list[asyncio.Queue[float]] = [asyncio.Queue() for _ in pairs]

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, due: asyncio.Queue[float]) -> None:
        while True:
            when = await due.get()
            if when < 0:
                return
            writer.write(command + b"\r\n")
            await writer.drain()
            await reader.readuntil(b"\r\n")
            latencies.append(time.monotonic() - when)

    workers = [asyncio.create_task(connection(r, w, q)) for (r, w), q in zip(pairs, queues, strict=True)]
    start = time.monotonic() + 0.05
    total = int(rate * seconds)
    for i in range(total):
        due = start + i / rate
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        queues[i % len(queues)].put_nowait(due)  # due time, not send time: no coordinated omission
    for q in queues:
        q.put_nowait(-1.0)
    await asyncio.gather(*workers)
    for _, w in pairs:
        w.close()
    return latencies


def client(groups: Groups, port: int, rate: float, seconds: float, command: str = "PING") -> list[float]:
    """The load generator, in the online group, as its own process."""
    code = (
        "import asyncio, json, sys; sys.path.insert(0, sys.argv[1]); "
        "from bench.guard.bench_guard import _drive; "
        "print(json.dumps(asyncio.run(_drive(int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), 16, "
        "sys.argv[5].encode()))))"
    )
    out = subprocess.run(
        [*groups.enter("online"), sys.executable, "-c", code, str(ROOT), str(port), str(rate), str(seconds), command],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds * 4 + 60,
    )
    values: list[float] = json.loads(out.stdout)
    return values


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def antagonist(groups: Groups, kind: str, seconds: float) -> subprocess.Popen[str]:
    stressor = {
        "cpu": ["--cpu", "2"],
        "cache": ["--cache", "2"],
        # direct I/O: cgroup v1 throttles it (buffered writes reach the disk outside the group)
        "disk": ["--hdd", "2", "--hdd-opts", "direct", "--hdd-bytes", "256m", "--temp-path", str(DISK_DIR)],
    }[kind]
    return subprocess.Popen(
        [*groups.enter("offline"), "stress-ng", *stressor, "--timeout", f"{int(seconds)}s", "--metrics-brief"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def bogo_ops_per_s(output: str) -> float:
    """stress-ng --metrics-brief: the stressors' summed bogo ops/s (real time)."""
    total = 0.0
    for line in output.splitlines():
        m = re.search(r"metrc: \[\d+\]\s+(\w+)\s+(\d+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)", line)
        if m:
            total += float(m[3])
    return total


def guard(groups: Groups, workdir: Path) -> subprocess.Popen[bytes]:
    config = workdir / "collector.yaml"
    config.write_text(
        json.dumps(
            {
                "stream": {"enabled": False},
                "metricsHost": "127.0.0.1",
                "metricsPort": 0,
                "bioBackend": "off",
                "llc": "off",
                "resctrl": "off",
                "onlineCgroups": [f"{NAME}/online"],
                "offlineCgroups": [f"{NAME}/offline"],
                "guard": {"mode": "on", "journal": str(workdir / "guard-limits.json")},
            }
        )
    )
    log = (workdir / "collector.log").open("ab")
    with log:
        return subprocess.Popen(
            [sys.executable, "-m", "mco_py.cli", "collector", "--config", str(config)], stdout=log, stderr=log
        )


def one_round(
    groups: Groups, port: int, args: argparse.Namespace, *, kind: str, mode: str, workdir: Path
) -> dict[str, float]:
    seconds = args.seconds + WARMUP_S
    protector = guard(groups, workdir) if mode == "guard on" else None
    stress = antagonist(groups, kind, seconds + 1) if mode != "no antagonist" else None
    # disk rounds: SETs, each fsync'd to redis's append-only file before the reply
    rate, command = (args.disk_rate, "SET k v") if kind == "disk" else (args.rate, "PING")
    try:
        latencies = client(groups, port, rate, seconds, command)
    finally:
        out = ""
        if stress is not None:
            out, _ = stress.communicate(timeout=seconds + 60)
        if protector is not None:
            protector.send_signal(signal.SIGTERM)
            protector.wait(30)
    kept = latencies[int(WARMUP_S * rate) :]
    return {
        "p50_ms": percentile(kept, 0.50) * 1e3,
        "p99_ms": percentile(kept, 0.99) * 1e3,
        "p999_ms": percentile(kept, 0.999) * 1e3,
        "offline_ops_s": bogo_ops_per_s(out) if stress is not None else 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per round (after 3 s warm-up)")
    parser.add_argument("--rate", type=float, default=2000.0, help="online requests per second")
    parser.add_argument("--antagonists", default="cpu,cache", help="any of cpu, cache, disk")
    parser.add_argument("--disk-rate", type=float, default=500.0, help="online SETs per second in disk rounds")
    args = parser.parse_args()
    for tool in ("redis-server", "stress-ng"):
        if shutil.which(tool) is None:
            print(f"{tool} missing: apt-get install redis-server stress-ng", file=sys.stderr)
            return 2
    if os.geteuid() != 0:
        print("run as root (cgroups)", file=sys.stderr)
        return 2
    groups = Groups()
    port = free_port()
    DISK_DIR.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen(
        [*groups.enter("online"), "redis-server", "--port", str(port), "--save", "", "--appendonly", "yes",
         "--appendfsync", "always", "--dir", str(DISK_DIR)],  # PINGs never touch the file
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    results: dict[str, list[dict[str, float]]] = {}
    try:
        time.sleep(1.0)
        with tempfile.TemporaryDirectory() as tmp:
            for kind in args.antagonists.split(","):
                for r in range(args.rounds):
                    for mode in ("no antagonist", "guard off", "guard on"):
                        calm = "no antagonist" if kind != "disk" else "no antagonist, disk (SET)"
                        key = calm if mode == "no antagonist" else f"{kind}, {mode}"
                        got = one_round(groups, port, args, kind=kind, mode=mode, workdir=Path(tmp))
                        results.setdefault(key, []).append(got)
                        print(
                            f"round {r + 1} {key:22} " + "  ".join(f"{k} {v:9.3f}" for k, v in got.items()), flush=True
                        )
    finally:
        server.terminate()
        server.wait(10)
        groups.remove()
        shutil.rmtree(DISK_DIR, ignore_errors=True)
    print(f"\n== medians over rounds ({os.cpu_count()} CPUs, rate {args.rate:g}/s, {args.seconds:g} s per round) ==")
    median = {key: {m: statistics.median(r[m] for r in rounds) for m in rounds[0]} for key, rounds in results.items()}
    for key, values in median.items():
        print(f"{key:22} " + "  ".join(f"{k} {v:9.3f}" for k, v in values.items()))
    for kind in args.antagonists.split(","):
        base = median["no antagonist" if kind != "disk" else "no antagonist, disk (SET)"]["p99_ms"]
        on, off = median[f"{kind}, guard on"], median[f"{kind}, guard off"]
        print(
            f"{kind}: p99 guard on / no antagonist = {on['p99_ms'] / base:.2f} (target <= 1.3); "
            f"guard off / no antagonist = {off['p99_ms'] / base:.2f}; "
            f"offline throughput on / off = {on['offline_ops_s'] / off['offline_ops_s']:.2f} (target >= 0.5)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
