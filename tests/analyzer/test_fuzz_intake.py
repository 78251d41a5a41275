"""Fuzz pass over the analyzer's sample intake: whatever a peer sends, the engine answers.

Arbitrary wire bytes and arbitrary well-formed messages (names of any length and alphabet,
timestamps from the distant past to the far future, NaN and infinities, duplicate and
unknown signals, packed names and values that do not pair, undefined enum values) go
through ``Engine.accept_messages`` (the ingest hot path). Nothing may raise, every sample
is accepted or rejected exactly once, and the node table stays within its bound.
"""

from __future__ import annotations

import math

from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from mco_py.analyzer.engine import Engine, Outcome
from mco_py.analyzer.metrics import AnalyzerMetrics
from mco_py.model import SIGNAL_NAMES
from mco_py.report.document import report_of
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb
from tests.rules_fixtures import quick_rules

from .test_engine import T0, Clock

MAX_NODES = 8
NANOS = 1_000_000_000

names = st.one_of(
    st.sampled_from(["node-1", "node-2", "node-3", "", "Node_1", "a" * 254, "x.y", "-bad"]),
    st.text(max_size=40),
)
values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1.0, 50.0, 99.9, -1.0, 1e308, math.nan, math.inf]),
)
signals = st.builds(
    lambda name, device, value, absent, kind, backend, events: pb.Signal(
        name=name,
        device=device,
        backend=backend,
        **({"absent": pb.Absence(kind=kind, reason="r")} if absent else {"value": value}),
        **({} if events is None else {"events": events}),
    ),
    st.one_of(st.sampled_from(SIGNAL_NAMES), st.text(max_size=12)),
    st.sampled_from(["", "", "vda", "nvme0n1"]),
    values,
    st.booleans(),
    st.integers(0, 12),  # 7..12 are not defined in AbsenceKind
    st.sampled_from(["procfs", "libbpf", ""]),
    st.one_of(st.none(), st.integers(0, 2**64 - 1)),
)
timestamps = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(int((T0 - 400) * NANOS), int((T0 + 20) * NANOS)),  # around now: most get scored
)
hostile = st.builds(
    lambda node, ts, sigs, interval, packed_names, packed: pb.Sample(
        node=node, timestamp_unix_nanos=ts, signals=sigs, interval_ms=interval, value_names=packed_names, values=packed
    ),
    names,
    timestamps,
    st.lists(signals, max_size=10),
    st.integers(0, 2**32 - 1),
    st.lists(st.one_of(st.sampled_from(SIGNAL_NAMES), st.text(max_size=12)), max_size=6),
    st.lists(values, max_size=6),  # as many as the names or not
)
plausible = st.builds(  # what a collector sends, so that the scoring path is fuzzed too
    lambda node, ts, sigs, packed: pb.Sample(
        node=node,
        timestamp_unix_nanos=ts,
        signals=sigs[packed:],
        interval_ms=1000,
        value_names=[sig.name for sig in sigs[:packed]],
        values=[sig.value for sig in sigs[:packed]],
    ),
    st.sampled_from(["node-1", "node-2", "node-3", "node-4"]),
    st.integers(int((T0 - 60) * NANOS), int((T0 + 5) * NANOS)),
    st.lists(
        st.builds(
            lambda name, value: pb.Signal(name=name, value=value, backend="procfs"),
            st.sampled_from(SIGNAL_NAMES),
            st.floats(0, 100),
        ),
        max_size=len(SIGNAL_NAMES),
        unique_by=lambda sig: sig.name,
    ),
    st.integers(0, len(SIGNAL_NAMES)),  # how many of them go packed (the collector's form)
)
samples = st.one_of(hostile, plausible)


def engine() -> Engine:
    return Engine(
        quick_rules(), metrics=AnalyzerMetrics(CollectorRegistry()), identity="fuzz", clock=Clock(), max_nodes=MAX_NODES
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(samples, max_size=12), min_size=1, max_size=4))
def test_any_messages_are_accepted_or_rejected_once(batches: list[list[pb.Sample]]) -> None:
    fast = engine()
    for batch in batches:
        got = fast.accept_messages(batch, Outcome())
        assert got.accepted + got.rejected == len(batch)
        assert sum(got.counts.values()) == got.rejected
        assert all(len(message) <= 512 for message in got.reasons.values())
    assert len(fast._last_time) <= MAX_NODES
    report = report_of(fast.build_report().status)  # what was scored can be reported
    assert len(report.nodes) <= MAX_NODES


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=2048))
def test_any_wire_bytes_are_refused_or_taken(data: bytes) -> None:
    try:
        batch = pb.SampleBatch.FromString(data)
    except DecodeError:
        return  # grpc answers the stream with an error; nothing reaches the engine
    outcome = engine().accept_messages(list(batch.samples), Outcome())
    assert outcome.accepted + outcome.rejected == len(batch.samples)
