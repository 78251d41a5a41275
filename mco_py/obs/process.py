"""How MCO's processes use the garbage collector and the C allocator: decided here, once.

Why: each service's memory is a large, long-lived state built at start-up or per report
(modules and config everywhere, the scorer's nodes in the analyzer, the report and labels
in the extender) beside short-lived, acyclic garbage (samples, reports being built,
request bodies). CPython's cyclic GC walks the long-lived objects again and again for
nothing, and the pause lands on whatever runs then: a request's p99 in the extender, a
report build in the analyzer. So every service freezes what it built at start-up out of
the GC's view, except the analyzer, which instead pauses the GC around each report build and
moves what survived to the oldest generation (:func:`gc_paused`): its promotions unfreeze
everything, so a freeze of its own would not last. The extender alone receives bodies of
megabytes: glibc would hand each one back to the OS on free and fault it in again on the
next request, so it keeps large blocks in the heap (:func:`tune`) and gives the free pages
back some seconds after a large request instead (:class:`HeapTrimmer`). Each ``main()``
calls :func:`tune` with its service's name; nothing else here touches the GC or malloc.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import functools
import gc
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, cast

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

Service = Literal["collector", "analyzer", "extender"]


@dataclass(frozen=True, slots=True)
class Tuning:
    """What :func:`tune` set up."""

    malloc_tuned: bool = False
    """glibc keeps large blocks in the heap (the extender on glibc)."""
    trim: Callable[[int], object] | None = None
    """glibc's ``malloc_trim(pad)`` for a :class:`HeapTrimmer`; None when large blocks are not kept."""


def tune(service: Service) -> Tuning:
    """Set this process's GC and allocator policy for ``service`` (see the module doc). Call it once
    from ``main()`` when start-up is done: what exists then is frozen out of the GC's view."""
    if service == "analyzer":
        return Tuning()  # the GC pauses around each report build instead (gc_paused)
    gc.collect()
    gc.freeze()
    if service == "collector":
        return Tuning()
    # a request allocates a few hundred tracked objects that die with it: young collections
    # found nothing, and each full one walked every module object (a pause on some request's p99)
    gc.set_threshold(20_000, 50, 100)
    tuned = _keep_large_blocks()
    return Tuning(malloc_tuned=tuned, trim=malloc_trim() if tuned else None)


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The C library (looked up once: ``find_library`` runs ldconfig), or None when not found."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def _glibc_function(name: str) -> Any:
    """The C library's function ``name``, or None (no C library, or one without it: musl and others)."""
    return getattr(_glibc(), name, None)


def _keep_large_blocks() -> bool:
    """Keep blocks up to 32 MiB in the heap and never shrink it on free (glibc returns blocks over
    128 KiB to the OS on free by default, so every large request page-faults). False when not on glibc."""
    mallopt = _glibc_function("mallopt")
    if mallopt is None:
        return False
    ok = mallopt(_M_MMAP_THRESHOLD, 32 * 1024 * 1024) == 1
    return bool(mallopt(_M_TRIM_THRESHOLD, 1024 * 1024 * 1024) == 1 and ok)


def malloc_trim() -> Callable[[int], object] | None:
    """glibc's ``malloc_trim(pad)`` (gives the heap's free pages back to the OS), or None when not on glibc."""
    trim = _glibc_function("malloc_trim")
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return cast("Callable[[int], object]", trim)


class HeapTrimmer:
    """Calls ``trim(pad)`` (glibc's ``malloc_trim``) ``delay`` seconds after a large request.

    A heap that keeps large blocks only grows: whenever a body (a prioritize for a hundred
    nodes is megabytes) fits no free hole, the heap is extended, and the free space stays resident.
    ``malloc_trim(pad)`` gives the free pages back (holes too, by ``madvise``) except ``pad``
    bytes at the top of the heap; the pad is the largest body since the last trim, so the
    next body of that size fits there instead of extending the heap again. At most one trim
    per ``delay`` seconds, and only after a body of ``min_body`` bytes or more: a trim is not free
    (docs/benchmarks.md, "Extender", "Memory soak").
    One server, its loop's thread.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        trim: Callable[[int], object],
        *,
        delay: float = 10.0,
        min_body: int = 512 * 1024,
    ) -> None:
        self._loop = loop
        self._trim = trim
        self._delay = delay
        self._min_body = min_body
        self._largest = 0
        self._pending: asyncio.TimerHandle | None = None

    def note(self, body_size: int) -> None:
        """``body_size`` bytes went through the heap: a request body, or replies dropped unread."""
        if body_size < self._min_body:
            return
        self._largest = max(self._largest, body_size)
        if self._pending is None:
            self._pending = self._loop.call_later(self._delay, self._run)

    def _run(self) -> None:
        pad, self._largest, self._pending = self._largest, 0, None
        self._trim(pad)


#: Every this many promotions a full collection runs instead (every 5 minutes at the 5 s report
#: interval), so garbage cycles swept into the oldest generation never pile up for long. A full
#: collection walks every object, about what the promotions save in tens of young collections,
#: so it must stay rare.
FULL_COLLECTION_EVERY = 60


class _Promoter:
    """Moves every object the GC tracks into its oldest generation, without a collection.

    ``freeze`` moves the tracked objects to the permanent generation and ``unfreeze`` puts
    them back into the oldest one: two list splices, no traversal. The report just built
    (kept until the next report) would otherwise be walked by the young collection that its
    allocations trigger as soon as the GC is back on, and again by the middle one. Garbage
    cycles among the promoted objects wait for a full collection, which CPython runs rarely
    once most objects skip the young generations; so every :data:`FULL_COLLECTION_EVERY`-th
    time this runs one itself.
    """

    def __init__(self) -> None:
        self._count = 0

    def __call__(self) -> None:
        self._count += 1
        if self._count % FULL_COLLECTION_EVERY == 0:
            gc.collect()
            return
        gc.freeze()
        gc.unfreeze()


class _GCPause:
    """Disables the cyclic GC while any holder is inside; re-enables it only if it was on before.

    On the way out the objects allocated meanwhile go straight to the oldest generation
    (:class:`_Promoter`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._was_enabled = False
        self._promote = _Promoter()

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._holders == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0 and self._was_enabled:
                    self._promote()
                    gc.enable()


gc_paused = _GCPause()
"""``with gc_paused():`` around work that allocates much acyclic data kept afterwards (the analyzer's
report build): no collection inside, what survived promoted to the oldest generation after."""
