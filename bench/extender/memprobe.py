"""Bench-only: run ``mco extender`` with a sampler thread that writes memory figures as JSON lines.

Usage (run.py --soak --probe does this): python bench/extender/memprobe.py OUT.jsonl [extender args...]

Every ``MCO_PROBE_INTERVAL`` seconds (default 10) one line with: RSS and
/proc/self/smaps_rollup (Anonymous, ...), glibc ``mallinfo2()`` (heap ``arena``,
mmapped ``hblkhd``, in use ``uordblks``, free ``fordblks``, releasable at the
top ``keepcost``), pymalloc's allocated block count, the GC's tracked object
count and its 12 most common types. With ``MCO_PROBE_TRACEMALLOC=N`` (frames),
tracemalloc runs too: a snapshot at ``MCO_PROBE_WARMUP`` seconds (default 60)
is the baseline, and every later sample writes the top growth by traceback to
``OUT.tracemalloc.txt``. With ``MCO_PROBE_COLLECT_AT=S``, one ``gc.collect()`` at S
seconds (its count of unreachable objects is in the next line as ``collected``):
garbage waiting for the cyclic GC shows as the drop it causes. The server's heap
trims (``malloc_trim``) are counted and timed (``trims``: count, total and
longest seconds).
"""

from __future__ import annotations

import collections
import ctypes
import gc
import json
import linecache
import os
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


_libc = ctypes.CDLL(None)
_libc.mallinfo2.restype = _MallInfo2


def mallinfo() -> dict[str, int]:
    info = _libc.mallinfo2()
    return {name: int(getattr(info, name)) for name, _ in _MallInfo2._fields_}


def smaps_rollup() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[-1] == "kB":
            out[key] = int(parts[0])
    return out


TRIMS = {"count": 0, "seconds": 0.0, "max": 0.0}


def timed(trim: Callable[[int], object] | None) -> Callable[[int], object] | None:
    """``trim`` (the service's ``malloc_trim``) counted and timed in ``TRIMS``."""
    if trim is None:
        return None

    def _timed(pad: int) -> object:
        began = time.perf_counter()
        result = trim(pad)
        took = time.perf_counter() - began
        TRIMS["count"] += 1
        TRIMS["seconds"] += took
        TRIMS["max"] = max(TRIMS["max"], took)
        return result

    return _timed


def sample(start: float) -> dict[str, object]:
    objects = gc.get_objects()
    types = collections.Counter(type(o).__name__ for o in objects).most_common(12)
    count = len(objects)
    del objects
    return {
        "t": round(time.monotonic() - start, 1),
        "smaps_kb": smaps_rollup(),
        "mallinfo": mallinfo(),
        "pymalloc_blocks": sys.getallocatedblocks(),
        "gc_objects": count,
        "gc_frozen": gc.get_freeze_count(),
        "gc_counts": gc.get_count(),
        "gc_top": types,
        "trims": dict(TRIMS),
    }


_NOT_THE_PROBE = [
    tracemalloc.Filter(False, __file__),
    tracemalloc.Filter(False, tracemalloc.__file__),
    tracemalloc.Filter(False, linecache.__file__),
]
"""Leave out what the probe itself allocates (snapshots, tracebacks' source lines)."""


def sampler(out: Path, interval: float, warmup: float, frames: int, collect_at: float) -> None:
    start = time.monotonic()
    base: tracemalloc.Snapshot | None = None
    collected: int | None = None
    with out.open("a") as fh:
        while True:
            time.sleep(interval)
            if collect_at and collected is None and time.monotonic() - start >= collect_at:
                collected = gc.collect()
                fh.write(json.dumps({**sample(start), "collected": collected}) + "\n")
            fh.write(json.dumps(sample(start)) + "\n")
            fh.flush()
            if not frames:
                continue
            elapsed = time.monotonic() - start
            if base is None and elapsed >= warmup:
                base = tracemalloc.take_snapshot().filter_traces(_NOT_THE_PROBE)
            elif base is not None:
                snap = tracemalloc.take_snapshot().filter_traces(_NOT_THE_PROBE)
                stats = snap.compare_to(base, "traceback")
                lines = [f"t={elapsed:.0f}s traced now {tracemalloc.get_traced_memory()}"]
                for stat in stats[:25]:
                    now = stat.size / 1024
                    lines.append(f"{stat.size_diff / 1024:+.1f} KiB {stat.count_diff:+d} blocks (now {now:.1f} KiB)")
                    lines.extend("    " + line for line in stat.traceback.format()[-frames * 2 :])
                Path(str(out) + ".tracemalloc.txt").write_text("\n".join(lines) + "\n")
                del snap, stats


def main() -> int:
    out = Path(sys.argv[1])
    frames = int(os.environ.get("MCO_PROBE_TRACEMALLOC", "0"))
    if frames:
        tracemalloc.start(frames)
    interval = float(os.environ.get("MCO_PROBE_INTERVAL", "10"))
    warmup = float(os.environ.get("MCO_PROBE_WARMUP", "60"))
    collect_at = float(os.environ.get("MCO_PROBE_COLLECT_AT", "0"))
    threading.Thread(
        target=sampler,
        args=(out, interval, warmup, frames, collect_at),
        daemon=True,
        name="memprobe",
    ).start()
    from mco_py.cli import main as cli_main

    try:
        from mco_py.obs import process as owner  # where the trim is looked up

        name = "malloc_trim"
    except ImportError:  # older servers: the extender's main (or none at all)
        from mco_py.extender import main as owner

        name = "glibc_malloc_trim"
    original = getattr(owner, name, None)
    if original is not None:
        setattr(owner, name, lambda: timed(original()))
    return cli_main(sys.argv[2:])


if __name__ == "__main__":
    raise SystemExit(main())
