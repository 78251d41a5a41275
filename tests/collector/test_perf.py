"""The perf reader with software events (same class as the LLC counters), and scaling."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mco_py.collector.perf import (
    LLC,
    PERF_COUNT_SW_CONTEXT_SWITCHES,
    PERF_COUNT_SW_CPU_CLOCK,
    PERF_TYPE_SOFTWARE,
    CounterValue,
    EventSpec,
    LlcSource,
    PerfCounters,
    scaled_delta,
)
from mco_py.collector.procfs import online_cpus
from mco_py.collector.signals import Absence

from .conftest import FIXTURES, is_root

CPU_CLOCK = EventSpec("cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK)
CTX_SWITCHES = EventSpec("context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES)

needs_perf = pytest.mark.skipif(not is_root(), reason="system-wide perf counters need root or CAP_PERFMON")


def test_scaled_delta_multiplexing() -> None:
    old = CounterValue(value=100, enabled=1_000, running=1_000)
    # Counted 50 while scheduled a quarter of the enabled time -> 200 estimated.
    new = CounterValue(value=150, enabled=5_000, running=2_000)
    assert scaled_delta(old, new) == pytest.approx(200.0)
    assert scaled_delta(old, CounterValue(value=100, enabled=2_000, running=1_000)) is None


@given(st.integers(0, 2**40), st.integers(1, 2**30), st.integers(1, 2**30))
def test_scaled_delta_never_below_count(count: int, running: int, extra: int) -> None:
    old = CounterValue(0, 0, 0)
    new = CounterValue(count, running + extra, running)
    scaled = scaled_delta(old, new)
    assert scaled is not None
    assert scaled >= count
    assert scaled == pytest.approx(count * (running + extra) / running)


@needs_perf
def test_software_counters_sum_over_cpus() -> None:
    cpus = online_cpus(Path("/sys"))
    counters = PerfCounters((CPU_CLOCK, CTX_SWITCHES), cpus)
    try:
        started = time.monotonic()  # before the first read: elapsed covers the whole counted window
        assert counters.read_deltas() is None
        stop = threading.Event()

        def switcher() -> None:
            while not stop.is_set():
                time.sleep(0.001)

        thread = threading.Thread(target=switcher)
        thread.start()
        time.sleep(0.4)
        stop.set()
        thread.join()
        deltas = counters.read_deltas()
        elapsed = time.monotonic() - started
    finally:
        counters.close()
    assert deltas is not None
    clock_ns, switches = deltas
    assert clock_ns is not None
    assert switches is not None
    # cpu-clock counts wall time on every CPU it watches: ~len(cpus) x elapsed.
    assert 0.8 * len(cpus) * 0.4e9 <= clock_ns <= 1.2 * len(cpus) * elapsed * 1e9
    assert switches >= 100  # the sleeper alone switches ~400 times


@needs_perf
def test_llc_source_with_software_events_gives_a_ratio() -> None:
    source = LlcSource(FIXTURES / "host/sys", event_sets=[(CPU_CLOCK, CTX_SWITCHES)])
    try:
        assert source.backend == "perf"
        assert source.read(0.0)[0].absence is Absence.WARMING_UP
        time.sleep(0.2)
        reading = source.read(0.2)[0]
    finally:
        source.close()
    assert reading.name == LLC
    assert reading.value is not None
    assert 0 < reading.value < 1  # switches per ns of cpu-clock
    assert reading.events is not None
    assert reading.events > 1e8


def test_llc_hardware_events_here() -> None:
    """With a PMU the rate is a fraction; without one (this VM) it is absent with the errno text."""
    source = LlcSource(Path("/sys"))
    try:
        first = source.read(0.0)[0]
        time.sleep(0.1)
        reading = source.read(0.1)[0]
    finally:
        source.close()
    if source.backend == "perf":
        assert first.absence is Absence.WARMING_UP
        assert reading.value is None or 0.0 <= reading.value <= 1.0
    else:
        assert reading.value is None
        assert "perf_event_open(cache-references" in reading.reason
        assert ("ENOENT" in reading.reason) or ("EACCES" in reading.reason) or ("EOPNOTSUPP" in reading.reason)
        assert reading.absence in (Absence.UNSUPPORTED, Absence.PERMISSION)


def test_llc_off() -> None:
    source = LlcSource(Path("/sys"), enabled=False)
    assert source.read(0.0)[0].absence is Absence.DISABLED


def test_perf_fds_closed() -> None:
    if not is_root():
        pytest.skip("needs root")
    before = len(os.listdir("/proc/self/fd"))
    counters = PerfCounters((CPU_CLOCK,), [0])
    assert len(os.listdir("/proc/self/fd")) == before + 1
    counters.close()
    assert len(os.listdir("/proc/self/fd")) == before
