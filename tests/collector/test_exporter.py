"""/metrics of a running collector (fixture roots, port 0) and the series rules."""

from __future__ import annotations

import logging
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from mco_py.collector.exporter import (
    BIO_LATENCY_BOUNDS_US,
    SIGNAL_METRICS,
    TOTAL_METRICS,
    CollectorMetrics,
    bio_latency,
)
from mco_py.collector.histogram import latency_slot
from mco_py.collector.main import CollectorDaemon
from mco_py.collector.sampler import Sampler, open_sources
from mco_py.collector.signals import Absence, NodeSample, Reading, StreamStatus, Total
from mco_py.config.collector import CollectorSettings
from mco_py.config.web import WebSettings
from tests.config.settings import collector_settings


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def names(series: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> set[str]:
    return {name for name, _ in series}


def fixture_settings(host_tree: Path, *, interval_s: float) -> CollectorSettings:
    """An exporter-only collector on the fixture host, /metrics on a free loopback port."""
    return collector_settings(
        flags={
            "nodeName": "node-a",
            "procRoot": str(host_tree / "proc"),
            "sysRoot": str(host_tree / "sys"),
            "tracefsRoot": str(host_tree / "no-tracefs"),
            "bioBackend": "diskstats",
            "metricsHost": "127.0.0.1",
            "metricsPort": 0,
            "interval": interval_s,
            "stream.enabled": False,
        }
    )


def test_running_collector_exports_fixture_values(host_tree: Path) -> None:
    settings = fixture_settings(host_tree, interval_s=0.1)
    sampler = Sampler(open_sources(settings), node=settings.node_name)
    daemon = CollectorDaemon(settings, sampler, registry=CollectorRegistry())
    try:
        daemon.start()
        deadline = time.monotonic() + 30
        while True:
            series = scrape(daemon.port)
            if series.get(("mco_collector_samples_total", ())) and series[("mco_collector_samples_total", ())] >= 2:
                break
            assert time.monotonic() < deadline, "no samples taken"
            time.sleep(0.05)
    finally:
        daemon.close()
        sampler.close()
    io_some = float((host_tree / "proc/pressure/io").read_text().split()[1].split("=")[1])
    assert series[("mco_node_psi_io_some_avg10_raw", ())] == io_some
    for resource in ("cpu", "memory", "io"):
        for kind in ("some", "full"):
            assert (f"mco_node_psi_{resource}_{kind}_avg10_raw", ()) in series
            assert (f"mco_node_psi_{resource}_{kind}_rate_raw", ()) in series  # fixture unchanged -> 0 %
    assert series[("mco_node_psi_io_some_rate_raw", ())] == 0.0
    # No PMU in the fixture host -> no series at all, and the absence is labelled.
    assert "mco_node_cache_miss_rate" not in names(series)
    assert series[("mco_collector_signal_absent", (("kind", "unsupported"), ("signal", "llcMissRate")))] == 1.0
    assert "mco_node_bio_latency_p99_seconds" not in names(series)
    assert series[("mco_collector_backend_info", (("backend", "diskstats-average"), ("signal", "bio")))] == 1.0
    assert series[("mco_collector_backend_info", (("backend", "procfs"), ("signal", "psi")))] == 1.0
    assert series[("mco_collector_sample_duration_seconds_count", ())] >= 2
    assert "mco_node_cpu_steal_percent_raw" not in names(series)  # fixture frozen: no CPU time passes
    assert series[("mco_node_oom_kills_raw", ())] == 0.0
    # the running counts in base units: the kernel's PSI total= in seconds, vmstat's oom_kill
    io_full_total_us = int((host_tree / "proc/pressure/io").read_text().splitlines()[1].rsplit("=", 1)[1])
    assert series[("mco_node_pressure_io_full_seconds_total", ())] == io_full_total_us / 1e6
    assert series[("mco_node_oom_kills_total", ())] == 0.0
    assert series[("mco_node_bio_requests_total", ())] == 0.0  # frozen diskstats
    assert "mco_node_bio_latency_seconds_count" not in names(series)  # an average backend has no histogram


def test_series_follow_presence() -> None:
    registry = CollectorRegistry()
    statuses = [StreamStatus("a:9876", connected=True, sent=5, dropped=2, buffered=1, reconnects=1)]
    metrics = CollectorMetrics(registry, streams=lambda: statuses)
    present = NodeSample(
        node="n",
        timestamp=0.0,
        interval=1.0,
        readings=(
            Reading("bioLatencyP99Ms", 1.5, "libbpf", events=300),
            Reading("bioLatencyP99Ms", 2.5, "libbpf", device="vda", events=200),
            Reading("llcMissRate", 0.25, "perf"),
        ),
        backends={"bio": "libbpf"},
    )
    metrics.samples.update(present)
    assert registry.get_sample_value("mco_node_bio_latency_p99_seconds") == 0.0015  # 1.5 ms
    assert registry.get_sample_value("mco_device_bio_latency_p99_seconds", {"device": "vda"}) == 0.0025
    assert registry.get_sample_value("mco_device_bio_requests_raw", {"device": "vda"}) == 200
    assert registry.get_sample_value("mco_node_cache_miss_rate") == 0.25
    assert registry.get_sample_value("mco_collector_samples_dropped_total", {"analyzer": "a:9876"}) == 2
    assert registry.get_sample_value("mco_collector_stream_connected", {"analyzer": "a:9876"}) == 1
    absent = NodeSample(
        node="n",
        timestamp=1.0,
        interval=1.0,
        readings=(
            Reading.absent("bioLatencyP99Ms", "libbpf", Absence.INSUFFICIENT_DATA, "3 requests", events=3),
            Reading.absent("llcMissRate", "perf", Absence.UNSUPPORTED, "no PMU"),
        ),
        backends={"bio": "libbpf"},
    )
    metrics.samples.update(absent)
    assert registry.get_sample_value("mco_node_bio_latency_p99_seconds") is None
    assert registry.get_sample_value("mco_device_bio_latency_p99_seconds", {"device": "vda"}) is None
    assert registry.get_sample_value("mco_node_cache_miss_rate") is None
    assert (
        registry.get_sample_value(
            "mco_collector_signal_absent", {"signal": "bioLatencyP99Ms", "kind": "insufficient_data"}
        )
        == 1
    )


_label_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_value = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, 1.0, 12345678.0, 1e-7, 1e21])


@st.composite
def _readings(draw: st.DrawFn) -> Reading:
    name = draw(st.sampled_from([*SIGNAL_METRICS, "unknownSignal"]))
    device = draw(st.sampled_from(["", "vda", 'we"ird\\dev\nname']) | _label_text)
    events = draw(st.none() | st.integers(0, 10**9))
    if draw(st.booleans()):
        return Reading(name, draw(_value), "libbpf", device=device, events=events)
    return Reading.absent(name, "procfs", draw(st.sampled_from(list(Absence))), "why", device=device, events=events)


_slots = st.dictionaries(st.integers(0, 130), st.integers(1, 10**9), max_size=40)
_totals = st.lists(
    st.builds(Total, st.sampled_from([*TOTAL_METRICS, "unknownTotal"]), st.floats(0, 1e12))
    | st.builds(lambda slots: Total("bioLatency", float(sum(slots.values())), slots=slots), _slots),
    max_size=8,
    unique_by=lambda t: t.name,
)


@given(latencies_us=st.lists(st.integers(0, 1 << 27), max_size=300))
def test_the_latency_histogram_counts_exactly_at_every_bound(latencies_us: list[int]) -> None:
    """Bounds are slot boundaries: a bucket counts exactly the requests faster than it (whole microseconds)."""
    slots: dict[int, int] = {}
    for us in latencies_us:
        slots[latency_slot(us)] = slots.get(latency_slot(us), 0) + 1
    hist = bio_latency(slots)
    for bound, cumulative in zip(BIO_LATENCY_BOUNDS_US, hist.cumulative, strict=False):
        assert cumulative == sum(1 for us in latencies_us if us < bound)
    assert hist.les[-1] == "+Inf"
    assert hist.cumulative[-1] == len(latencies_us)
    assert hist.les[0] == "1.6e-05"
    # the sum is estimated from slot midpoints: within a slot's width (about 19 %, 1 us at the bottom)
    assert abs(hist.total - sum(latencies_us) / 1e6) <= sum(max(1.0, 0.2 * us) for us in latencies_us) / 1e6


@pytest.fixture(scope="module")
def frozen_proc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A /proc whose ``self`` never changes: the process_* series render the same twice."""
    root = tmp_path_factory.mktemp("proc")
    (root / "stat").write_text("cpu  1 2 3 4\nbtime 1800000000\n")
    (root / "self" / "fd").mkdir(parents=True)
    for fd in ("0", "1", "2"):
        (root / "self" / "fd" / fd).touch()
    # after "pid (comm)": state is field 0, utime 11, stime 12, starttime 19, vsize 20, rss 21
    after = ["0"] * 30
    after[0], after[11], after[12], after[19], after[20], after[21] = "S", "150", "50", "12345", "1000000", "2500"
    (root / "self" / "stat").write_text("1 (mco) " + " ".join(after) + "\n")
    (root / "self" / "limits").write_text(
        "Limit                     Soft Limit           Hard Limit           Units\n"
        "Max open files            1024                 524288               files\n"
    )
    return root


@settings(max_examples=100)
@given(
    readings=st.lists(_readings(), max_size=25, unique_by=lambda r: (r.name, r.device)),
    totals=_totals,
    analyzers=st.lists(_label_text, max_size=3, unique=True),
    openmetrics=st.booleans(),
)
def test_any_sample_gives_an_exposition_that_parses_back(
    *, readings: list[Reading], totals: list[Total], analyzers: list[str], openmetrics: bool
) -> None:
    """Odd device and analyzer names (quotes, backslashes, newlines) survive the exposition."""
    statuses = [
        StreamStatus(analyzer=a, connected=True, sent=1, dropped=0, buffered=0, reconnects=0) for a in analyzers
    ]
    registry = CollectorRegistry()
    metrics = CollectorMetrics(registry, streams=lambda: statuses)
    metrics.samples.update(NodeSample("n", 0.0, 1.0, tuple(readings), {}, tuple(totals)))
    if openmetrics:
        parsed = openmetrics_families(openmetrics_latest(registry).decode())  # type: ignore[no-untyped-call]
    else:
        parsed = text_string_to_metric_families(generate_latest(registry).decode())
    families = {f.name: f for f in parsed}
    devices = {
        r.device for r in readings if r.device and r.value is not None and SIGNAL_METRICS.get(r.name, ("", ""))[1]
    }
    exposed = {s.labels["device"] for f in families.values() for s in f.samples if "device" in s.labels}
    assert exposed == devices
    assert {s.labels["analyzer"] for s in families["mco_collector_stream_connected"].samples} == set(analyzers)


def test_process_series_come_from_this_process_proc_tree(frozen_proc: Path) -> None:
    registry = CollectorRegistry()
    CollectorMetrics(registry, process_proc_root=str(frozen_proc))
    frozen = generate_latest(registry)  # the frozen tree's numbers
    assert b"\nprocess_open_fds 3.0\n" in frozen
    assert b"\nprocess_cpu_seconds_total 2.0\n" in frozen  # (150 + 50) ticks at 100 Hz
    assert b"\nprocess_virtual_memory_bytes 1e+06\n" in frozen
    assert frozen.count(b"# TYPE process_cpu_seconds_total counter\n") == 1


def _without_process(body: bytes) -> bytes:
    """An exposition without the process_* series (CPU time and descriptors move between two scrapes)."""
    lines = body.splitlines(keepends=True)
    return b"".join(line for line in lines if not re.match(rb"(# (HELP|TYPE) )?process_", line))


def test_daemon_serves_plain_and_openmetrics_scrapes(host_tree: Path) -> None:
    settings_ = fixture_settings(host_tree, interval_s=30)
    sampler = Sampler(open_sources(settings_), node=settings_.node_name)
    daemon = CollectorDaemon(settings_, sampler)
    metrics = daemon.loop.metrics
    assert metrics is not None
    try:
        daemon.start()
        deadline = time.monotonic() + 30
        while not any(f.name == "mco_collector_backend_info" for f in metrics.samples.families()):
            assert time.monotonic() < deadline, "the first sample was never published"
            time.sleep(0.01)  # then nothing changes for 30 s (the interval)
        bodies = {}
        for accept in ("", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"):
            request = urllib.request.Request(f"http://127.0.0.1:{daemon.port}/metrics", headers={"Accept": accept})
            with urllib.request.urlopen(request, timeout=30) as response:
                bodies[accept] = response.read()
        expected_plain, expected_om = generate_latest(daemon.registry), openmetrics_latest(daemon.registry)  # type: ignore[no-untyped-call]
    finally:
        daemon.close()
        sampler.close()
    # nothing sampled since (30 s interval): the same numbers, but for this process's own
    assert _without_process(bodies[""]) == _without_process(expected_plain)
    om = bodies["application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"]
    assert _without_process(om) == _without_process(expected_om)
    for body in (bodies[""], om):
        assert b"\nprocess_resident_memory_bytes " in body
        assert b'\nmco_build_info{component="collector",' in body
    assert b"mco_node_psi_io_some_avg10_raw" in bodies[""]


def test_the_collectors_metrics_ask_for_basic_auth_when_set_and_say_insecure_otherwise(
    host_tree: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plain = fixture_settings(host_tree, interval_s=0.5)
    hashed = bcrypt.hashpw(b"scrape-pw", bcrypt.gensalt(rounds=4)).decode()
    secured = msgspec.structs.replace(plain, metrics_web=WebSettings(basic_auth_users={"prometheus": hashed}))
    statuses = {}
    for name, settings_ in (("plain", plain), ("secured", secured)):
        sampler = Sampler(open_sources(settings_), node=settings_.node_name)
        daemon = CollectorDaemon(settings_, sampler, registry=CollectorRegistry())
        try:
            with caplog.at_level(logging.INFO, logger="mco_py.collector.main"):
                daemon.start()
            url = f"http://127.0.0.1:{daemon.port}/metrics"
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    statuses[name] = [response.status]
            except urllib.error.HTTPError as exc:
                statuses[name] = [exc.code]
            request = urllib.request.Request(url, headers={"Authorization": "Basic cHJvbWV0aGV1czpzY3JhcGUtcHc="})
            with urllib.request.urlopen(request, timeout=10) as response:  # prometheus:scrape-pw
                statuses[name].append(response.status)
        finally:
            daemon.close()
            sampler.close()
    assert statuses == {"plain": [200, 200], "secured": [401, 200]}
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.getMessage().startswith("metrics on")]
    assert said[0][0] == logging.WARNING
    assert said[0][1].endswith("(http: INSECURE: plain HTTP, no authentication)")
    assert said[1][0] == logging.INFO
    assert said[1][1].endswith("(http: plain HTTP (passwords travel in clear text), basic auth)")
