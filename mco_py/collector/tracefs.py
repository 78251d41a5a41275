"""Block request latency from tracefs events in a private instance.

The backend mounts tracefs at the given root when it is not mounted, creates
``instances/mco-<pid>-<n>``, enables ``block/block_rq_issue`` and
``block/block_rq_complete`` there, and a reader thread parses ``trace_pipe``:
issue and completion are matched by (device, sector), the latency is bucketed
like the BPF histogram. Closing disables the events and removes the instance.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import re
import select
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from mco_py.collector.histogram import latency_slot
from mco_py.collector.signals import Absence, Unavailable, unavailable_from_oserror

log = logging.getLogger(__name__)

EVENTS = ("block/block_rq_issue", "block/block_rq_complete")
MAX_INFLIGHT = 65536
_counter = itertools.count()

_LINE = re.compile(
    r"\s(?P<ts>\d+\.\d+): (?P<event>block_rq_issue|block_rq_complete): "
    r"(?P<major>\d+),(?P<minor>\d+) \S+ (?:\d+ )?\(.*?\) (?P<sector>\d+) \+ \d+"
)


@dataclass(frozen=True, slots=True)
class BlockEvent:
    """One parsed trace_pipe line."""

    issue: bool
    """True for block_rq_issue, False for block_rq_complete."""
    timestamp: float
    """Trace clock, seconds."""
    dev: tuple[int, int]
    """(major, minor)."""
    sector: int


def parse_trace_line(line: str) -> BlockEvent | None:
    """A block_rq_issue/complete line, or None for anything else (other events, lost-event notes)."""
    match = _LINE.search(line)
    if match is None:
        return None
    return BlockEvent(
        issue=match["event"] == "block_rq_issue",
        timestamp=float(match["ts"]),
        dev=(int(match["major"]), int(match["minor"])),
        sector=int(match["sector"]),
    )


def ensure_mounted(root: Path) -> None:
    """Mount tracefs at ``root`` when it is not (needs CAP_SYS_ADMIN)."""
    if (root / "instances").is_dir():
        return
    if not root.is_dir():
        raise Unavailable(f"{root}: tracefs mount point missing", Absence.UNSUPPORTED)
    try:
        result = subprocess.run(
            ["mount", "-t", "tracefs", "nodev", str(root)], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"mount -t tracefs {root}: {exc}", Absence.PERMISSION) from exc
    if result.returncode != 0 or not (root / "instances").is_dir():
        raise Unavailable(
            f"mount -t tracefs {root} failed: {result.stderr.strip() or 'no instances/ after mount'}"
            " (needs CAP_SYS_ADMIN; or mount it before start)",
            Absence.PERMISSION,
        )


class TracefsBlockTracer:
    """A private tracefs instance with the block request events and a reader thread."""

    def __init__(self, root: Path, *, buffer_kb: int = 1024) -> None:
        ensure_mounted(root)
        self.instance = root / "instances" / f"mco-{os.getpid()}-{next(_counter)}"
        try:
            self.instance.mkdir()
        except OSError as exc:
            raise unavailable_from_oserror(f"mkdir {self.instance}", exc) from exc
        self._lock = threading.Lock()
        self._hist: dict[tuple[tuple[int, int], int], int] = {}
        self._inflight: dict[tuple[tuple[int, int], int], float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fd = -1
        self.lost_lines = 0
        try:
            _write(self.instance / "buffer_size_kb", str(buffer_kb))
            for event in EVENTS:
                if not (self.instance / "events" / event / "enable").exists():
                    raise Unavailable(f"tracefs has no {event} event", Absence.UNSUPPORTED)
                _write(self.instance / "events" / event / "enable", "1")
            self._fd = os.open(self.instance / "trace_pipe", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            self.close()
            raise unavailable_from_oserror(f"tracefs instance {self.instance}", exc) from exc
        except Unavailable:
            self.close()
            raise
        self._thread = threading.Thread(target=self._run, name="tracefs-block", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        pending = b""
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._fd], [], [], 0.2)
                if not ready:
                    continue
                chunk = os.read(self._fd, 1 << 16)
            except InterruptedError:
                continue
            except BlockingIOError:
                continue
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EINTR):
                    continue
                log.warning("tracefs reader stopped: %s", exc, extra={"instance": str(self.instance)})
                return
            if not chunk:
                continue
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            self._consume(lines)

    def _consume(self, lines: list[bytes]) -> None:
        with self._lock:
            for raw in lines:
                event = parse_trace_line(raw.decode("ascii", "replace"))
                if event is None:
                    if b"LOST" in raw:
                        self.lost_lines += 1
                    continue
                key = (event.dev, event.sector)
                if event.issue:
                    if len(self._inflight) >= MAX_INFLIGHT:
                        self._inflight.clear()
                    self._inflight[key] = event.timestamp
                    continue
                started = self._inflight.pop(key, None)
                if started is None or event.timestamp < started:
                    continue
                slot_key = (event.dev, latency_slot(int((event.timestamp - started) * 1e6)))
                self._hist[slot_key] = self._hist.get(slot_key, 0) + 1

    def take(self) -> dict[tuple[tuple[int, int], int], int]:
        """The histogram since the previous call: ((major, minor), slot) -> count."""
        with self._lock:
            out, self._hist = self._hist, {}
        return out

    @property
    def alive(self) -> bool:
        """True while the reader thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def close(self) -> None:
        """Stop the reader, disable the events and remove the instance (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if not self.instance.is_dir():
            return
        for event in EVENTS:
            with contextlib.suppress(OSError):
                _write(self.instance / "events" / event / "enable", "0")
        try:
            self.instance.rmdir()
        except OSError as exc:
            log.warning("cannot remove tracefs instance %s: %s", self.instance, exc)


def _write(path: Path, text: str) -> None:
    with path.open("w") as handle:
        handle.write(text)
