"""Detection benchmark: real stress-ng antagonists against a deployed MCO (not part of `make test`).

Runs each antagonist for DURATION seconds on this host while polling the standalone
report (``make run`` deploys it; root is needed for the cgroup-limited ones), and prints
per episode: seconds from the antagonist's start to a level of at least Medium (and High),
seconds from its stop back to None, the level changes (raises, lowers) and the worst level
and dimension seen. Short bursts check that a few seconds of load never flip the node to
High; an idle period counts false alarms (any level above None).

Usage (as root, after `make run`):
    .venv/bin/python bench/detection/run.py [--episodes cpu,disk,...] [--duration 40] [--idle 600]
        [--bursts 3] [--report /var/lib/mco/report.json] [--json results.json]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RANK = {"None": 0, "Low": 1, "Medium": 2, "High": 3}
MEMCG = Path("/sys/fs/cgroup/memory")
WORK = Path("/var/tmp/mco-detection-bench")


@dataclass(frozen=True)
class Antagonist:
    """One kind of interference: the command, and whether this host can see it (and through what)."""

    name: str
    command: list[str]
    seen_through: str
    """The signals that show it here, or why nothing does."""
    visible: bool = True
    memory_limit: int = 0
    """Run inside a memory cgroup with this limit (bytes); 0: no cgroup."""
    uncached: Path | None = None
    """A file whose pages are dropped from the page cache before the start (else a rerun reads it from memory)."""


def antagonists(duration: int) -> dict[str, Antagonist]:
    t = f"{duration + 30}s"  # the bench stops it; the timeout is a safety net
    hdd = str(WORK / "hdd")
    return {
        "cpu": Antagonist(
            "cpu", ["stress-ng", "--cpu", "6", "--timeout", t], "cpu: psiCpuSomeRate (6 hogs on 2 cores)"
        ),
        "cache": Antagonist(
            "cache",
            ["stress-ng", "--cache", "2", "--timeout", t],
            "cpu: psiCpuSomeRate (the thrashers queue for the CPUs); LLC misses need a PMU",
        ),
        "disk": Antagonist(
            "disk",
            ["stress-ng", "--hdd", "2", "--hdd-opts", "direct", "--temp-path", hdd, "--timeout", t],
            "io: psiIoSomeRate, psiIoFullRate (O_DIRECT writes and reads)",
        ),
        "pagecache": Antagonist(
            "pagecache",
            ["sh", "-c", f"read() {{ while :; do cat {WORK / 'big'} > /dev/null; done; }}; read & read"],
            "io: psiIoSomeRate, bioLatencyP99Ms; memory: psiMemorySomeRate (2 readers of 3 GiB in 1 GiB)",
            memory_limit=1 << 30,
            uncached=WORK / "big",
        ),
        "oom": Antagonist(
            "oom",
            ["stress-ng", "--vm", "2", "--vm-bytes", "384M", "--vm-keep", "--timeout", t],
            "memory: oomKills (2 x 384 MiB in a 256 MiB cgroup, killed and restarted)",
            memory_limit=256 << 20,
        ),
        "membw": Antagonist(
            "membw",
            ["stress-ng", "--stream", "2", "--timeout", t],
            "not visible here: memory bandwidth needs a PMU (no CPU waits, no stalls)",
            visible=False,
        ),
        "memory": Antagonist(
            "memory",
            ["stress-ng", "--vm", "2", "--vm-bytes", "30%", "--vm-keep", "--timeout", t],
            "not visible here: no swap, so filling memory below the limit stalls nothing",
            visible=False,
        ),
    }


class ReportPoller:
    """Reads the report file every ``period`` seconds in a thread and keeps the node's changes."""

    def __init__(self, path: Path, node: str, period: float = 0.2) -> None:
        self.path, self.node, self.period = path, node, period
        self.timeline: list[tuple[float, str, str, float, str]] = []
        """(monotonic time, level, dominant, score, report lastUpdateTime) whenever the level or dominant changed."""
        self.trace: list[tuple[float, str, dict[str, float]]] = []
        """(monotonic time, level, dimension scores) of every report written (for --json)."""
        self.last: tuple[str, str, float, str] = ("?", "", 0.0, "")
        self._dims: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def read(self) -> tuple[str, str, float, str] | None:
        try:
            doc = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return None
        status = doc.get("status", doc)
        for entry in status.get("nodes", ()):
            if entry.get("name") == self.node:
                self._dims = {k: float(v["score"]) for k, v in (entry.get("dimensions") or {}).items()}
                return entry["level"], entry.get("dominant", ""), float(entry["score"]), status["lastUpdateTime"]
        return None

    def _run(self) -> None:
        while not self._stop.is_set():
            now = self.read()
            if now is not None:
                if not self.timeline or now[:2] != self.last[:2]:
                    self.timeline.append((time.monotonic(), *now))
                if now[3] != self.last[3]:
                    self.trace.append((time.monotonic(), now[0], self._dims))
                self.last = now
            self._stop.wait(self.period)

    def level(self) -> str:
        return self.last[0]

    def since(self, start: float) -> list[tuple[float, str, str, float, str]]:
        """The changes from ``start`` on, led by the state in force at ``start``."""
        before = [row for row in self.timeline if row[0] < start]
        after = [row for row in self.timeline if row[0] >= start]
        return ([(start, *before[-1][1:])] if before else []) + after


@dataclass
class Episode:
    name: str
    seen_through: str
    visible: bool
    duration: float
    to_medium: float | None = None
    to_high: float | None = None
    back_to_none: float | None = None
    worst: str = "None"
    dominant: str = ""
    raises: int = 0
    lowers: int = 0
    levels: list[str] = field(default_factory=list)
    trace: list[tuple[float, str, dict[str, float]]] = field(default_factory=list)
    """Every report from 2 s before the start: (seconds since the start, level, dimension scores)."""

    def verdict(self) -> str:
        if self.name.startswith("burst"):
            return "reached High" if self.worst == "High" else "ok (never High)"
        if not self.visible:
            return "not visible here (as expected)" if self.worst == "None" else f"seen anyway ({self.worst})"
        problems = []
        if self.to_medium is None or self.to_medium > 10:
            problems.append("Medium not within 10 s")
        if self.back_to_none is None or self.back_to_none > 60:
            problems.append("None not within 60 s")
        if self.raises > 1 or self.lowers > 1:
            problems.append(f"{self.raises} raises, {self.lowers} lowers")
        return "ok" if not problems else "; ".join(problems)


def summarize(name: str, rows: list[tuple[float, str, str, float, str]], t0: float, t1: float) -> dict[str, Any]:
    """Times and counts of one episode from the poller's changes (``t0`` start, ``t1`` stop)."""
    out: dict[str, Any] = {"to_medium": None, "to_high": None, "back_to_none": None, "worst": "None", "dominant": ""}
    levels = [row[1] for row in rows]
    raises = lowers = 0
    for (_, a, *_), (_, b, *_) in itertools.pairwise(rows):
        if a in RANK and b in RANK and a != b:
            if RANK[b] > RANK[a]:
                raises += 1
            else:
                lowers += 1
    for t, level, dominant, _score, _updated in rows:
        rank = RANK.get(level, -1)
        if rank >= 2 and out["to_medium"] is None:
            out["to_medium"] = round(t - t0, 1)
        if rank >= 3 and out["to_high"] is None:
            out["to_high"] = round(t - t0, 1)
        if rank > RANK[out["worst"]]:
            out["worst"], out["dominant"] = level, dominant
    above = [row for row in rows if RANK.get(row[1], 0) > 0]
    if not above:
        out["back_to_none"] = 0.0
    else:
        last_none = [row for row in rows if row[1] == "None" and row[0] >= above[-1][0]]
        if last_none:
            out["back_to_none"] = round(max(0.0, last_none[0][0] - t1), 1)
    out.update(raises=raises, lowers=lowers, levels=levels)
    return out


@contextlib.contextmanager
def memory_cgroup(limit: int) -> Iterator[Path | None]:
    """A cgroup-v1 memory group with ``limit`` (None when ``limit`` is 0); removed afterwards."""
    if not limit:
        yield None
        return
    path = MEMCG / f"mco-detection-bench-{os.getpid()}"
    path.mkdir()
    try:
        (path / "memory.limit_in_bytes").write_text(str(limit))
        yield path
    finally:
        for _ in range(50):
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def drop_cached(path: Path) -> None:
    """Drop ``path``'s clean pages from the page cache (whichever cgroup they were charged to)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def start(antagonist: Antagonist, cgroup: Path | None) -> subprocess.Popen[bytes]:
    if antagonist.uncached is not None:
        drop_cached(antagonist.uncached)
    command = antagonist.command
    if cgroup is not None:  # join the group before exec: every child is charged to it
        command = ["sh", "-c", f'echo $$ > {cgroup / "cgroup.procs"} && exec "$@"', "sh", *command]
    return subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, cwd=WORK
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def settle(poller: ReportPoller, quiet: float = 15.0, limit: float = 180.0) -> None:
    """Wait until the node has been at None for ``quiet`` seconds (at most ``limit``)."""
    deadline = time.monotonic() + limit
    calm_since = None
    while time.monotonic() < deadline:
        if poller.level() == "None":
            calm_since = calm_since or time.monotonic()
            if time.monotonic() - calm_since >= quiet:
                return
        else:
            calm_since = None
        time.sleep(0.5)
    print(f"  (node not calm after {limit:.0f}s: level {poller.level()})", flush=True)


def run_episode(poller: ReportPoller, antagonist: Antagonist, duration: float, tail: float) -> Episode:
    settle(poller)
    with memory_cgroup(antagonist.memory_limit) as cgroup:
        t0 = time.monotonic()
        proc = start(antagonist, cgroup)
        time.sleep(duration)
        t1 = time.monotonic()
        stop(proc)
    deadline = t1 + tail
    while time.monotonic() < deadline:  # until None has held for 10 s after the stop, or the tail ends
        rows = poller.since(t1)
        if rows and rows[-1][1] == "None" and time.monotonic() - rows[-1][0] >= 10:
            break
        time.sleep(0.5)
    result = summarize(antagonist.name, poller.since(t0), t0, t1)
    trace = [(round(t - t0, 2), level, dims) for t, level, dims in poller.trace if t >= t0 - 2]
    return Episode(antagonist.name, antagonist.seen_through, antagonist.visible, duration, trace=trace, **result)


def run_burst(poller: ReportPoller, seconds: float) -> Episode:
    burst = Antagonist("burst", ["stress-ng", "--cpu", "6", "--timeout", f"{seconds + 5:.0f}s"], "cpu")
    episode = run_episode(poller, burst, seconds, tail=40.0)
    episode.name = f"burst {seconds:g}s"
    return episode


def run_idle(poller: ReportPoller, seconds: float) -> dict[str, Any]:
    settle(poller)
    t0 = time.monotonic()
    time.sleep(seconds)
    rows = poller.since(t0)
    alarms = [row[1] for row in rows if RANK.get(row[1], 0) > 0]
    return {"seconds": seconds, "false_alarms": len(alarms), "levels": [row[1] for row in rows]}


def prepare(names: list[str]) -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "hdd").mkdir(exist_ok=True)
    big = WORK / "big"
    if "pagecache" in names and (not big.exists() or big.stat().st_size < 3 << 30):
        print("writing a 3 GiB file for the page-cache thrash ...", flush=True)
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={big}", "bs=16M", "count=192", "oflag=direct", "status=none"], check=True
        )


def table(episodes: list[Episode]) -> str:
    head = ("episode", "to >=Medium s", "to High s", "back to None s", "raises/lowers", "worst (dim)", "verdict")
    rows = [head]
    for e in episodes:
        rows.append(
            (
                e.name,
                "-" if e.to_medium is None else f"{e.to_medium:.1f}",
                "-" if e.to_high is None else f"{e.to_high:.1f}",
                "-" if e.back_to_none is None else f"{e.back_to_none:.1f}",
                f"{e.raises}/{e.lowers}",
                f"{e.worst} ({e.dominant or '-'})",
                e.verdict(),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", type=Path, default=Path("/var/lib/mco/report.json"))
    parser.add_argument("--node", default=socket.gethostname(), help="node name in the report (default: host name)")
    parser.add_argument("--episodes", default="cpu,cache,disk,pagecache,oom,membw,memory")
    parser.add_argument("--duration", type=int, default=40, help="seconds each antagonist runs")
    parser.add_argument("--tail", type=float, default=90.0, help="most seconds to wait for None after a stop")
    parser.add_argument("--bursts", type=int, default=3, help="6 s CPU bursts")
    parser.add_argument("--burst-seconds", type=float, default=6.0)
    parser.add_argument("--idle", type=float, default=600.0, help="seconds of idle for false alarms (0: skip)")
    parser.add_argument("--json", type=Path, help="write every result here")
    args = parser.parse_args()
    if shutil.which("stress-ng") is None:
        print("stress-ng is not installed (apt-get install stress-ng)", file=sys.stderr)
        return 2
    names = [n for n in args.episodes.split(",") if n]
    known = antagonists(args.duration)
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"unknown episodes {unknown}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    poller = ReportPoller(args.report, args.node)
    if poller.read() is None:
        print(f"node {args.node} not in {args.report}: deploy with `make run` first (or pass --node)", file=sys.stderr)
        return 2
    prepare(names)
    poller.start()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    episodes: list[Episode] = []
    try:
        for name in names:
            print(f"episode {name} ({args.duration}s) ...", flush=True)
            episodes.append(run_episode(poller, known[name], args.duration, args.tail))
            print(table(episodes[-1:]).splitlines()[-1], flush=True)
        for _ in range(args.bursts):
            print(f"burst {args.burst_seconds:g}s ...", flush=True)
            episodes.append(run_burst(poller, args.burst_seconds))
            print(table(episodes[-1:]).splitlines()[-1], flush=True)
        idle = run_idle(poller, args.idle) if args.idle > 0 else None
    finally:
        poller.stop()
    print(f"\ndetection benchmark, {socket.gethostname()}, {os.cpu_count()} CPUs, started {started}")
    print(table(episodes))
    bursts_high = [e.name for e in episodes if e.name.startswith("burst") and e.worst == "High"]
    print(f"bursts that reached High: {len(bursts_high)} of {args.bursts}")
    if idle is not None:
        print(f"idle {idle['seconds']:.0f}s: {idle['false_alarms']} level change(s) above None")
    if args.json:
        args.json.write_text(json.dumps({"episodes": [asdict(e) for e in episodes], "idle": idle}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
