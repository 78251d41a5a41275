"""Protobuf <-> model: round trips, absence kinds, per-device folding, duplicates."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mco_py.analysis.samples import InvalidSample
from mco_py.model import SIGNAL_NAMES, Sample, SignalReading
from mco_py.rpc import codec
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb

reasons = st.sampled_from(
    ["", "unsupported: no PMU", "permission: EPERM", "warming up", "read error: garbled", "odd reason"]
)
readings = st.builds(
    lambda name, value, backend, reason, events: SignalReading(
        name, value, backend, "" if value is not None else reason, events
    ),
    st.sampled_from(SIGNAL_NAMES),
    st.one_of(st.none(), st.floats(allow_nan=False)),
    st.sampled_from(["procfs", "libbpf", ""]),
    reasons,
    st.one_of(st.none(), st.integers(0, 2**63)),
)


@settings(deadline=None)
@given(
    node=st.text(max_size=30),
    ts_ms=st.integers(0, 4_000_000_000_000),
    items=st.lists(readings, max_size=9, unique_by=lambda r: r.name),
)
def test_round_trip_model_proto_model(node: str, ts_ms: int, items: list[SignalReading]) -> None:
    sample = Sample(node=node, timestamp=ts_ms / 1000, signals={r.name: r for r in items})
    wire = codec.sample_to_proto(sample).SerializeToString()
    back = codec.sample_from_proto(pb.Sample.FromString(wire))
    assert back.node == sample.node
    assert math.isclose(back.timestamp, sample.timestamp, abs_tol=1e-6)
    assert dict(back.signals) == dict(sample.signals)


def test_absence_kind_travels_as_reason_prefix() -> None:
    msg = pb.Signal(
        name="llcMissRate", backend="perf", absent=pb.Absence(kind=pb.ABSENCE_KIND_UNSUPPORTED, reason="no PMU")
    )
    reading = codec.signal_from_proto(msg)
    assert reading.value is None
    assert reading.reason == "unsupported: no PMU"
    again = codec.signal_to_proto(reading)
    assert again.absent.kind == pb.ABSENCE_KIND_UNSUPPORTED
    assert again.absent.reason == "no PMU"


def test_zero_is_a_value_and_missing_oneof_is_absent() -> None:
    s = pb.Sample(node="n", signals=[pb.Signal(name="oomKills", value=0.0), pb.Signal(name="psiIoSomeAvg10")])
    sample = codec.sample_from_proto(s)
    assert sample.signals["oomKills"].value == 0.0
    assert sample.signals["psiIoSomeAvg10"].value is None
    assert sample.signals["psiIoSomeAvg10"].reason == "no value sent"


def test_per_device_readings_fold_to_the_worst() -> None:
    s = pb.Sample(
        node="n",
        signals=[
            pb.Signal(name="bioLatencyP99Ms", device="vda", value=3.0, events=100),
            pb.Signal(name="bioLatencyP99Ms", device="vdb", value=30.0, events=50),
            pb.Signal(name="bioLatencyP99Ms", device="vdc", absent=pb.Absence(kind=pb.ABSENCE_KIND_INSUFFICIENT_DATA)),
        ],
    )
    reading = codec.sample_from_proto(s).signals["bioLatencyP99Ms"]
    assert (reading.value, reading.events) == (30.0, 50)


def test_node_level_reading_wins_over_per_device_detail() -> None:
    s = pb.Sample(
        node="n",
        signals=[
            pb.Signal(name="bioLatencyP99Ms", device="vda", value=3.0, events=100),
            pb.Signal(name="bioLatencyP99Ms", value=4.0, events=150),
            pb.Signal(name="bioLatencyP99Ms", device="vdb", value=30.0, events=50),
        ],
    )
    reading = codec.sample_from_proto(s).signals["bioLatencyP99Ms"]
    assert (reading.value, reading.events) == (4.0, 150)


@pytest.mark.parametrize("device", ["", "vda"])
def test_duplicate_signal_is_rejected(device: str) -> None:
    s = pb.Sample(
        node="n",
        signals=[pb.Signal(name="psiIoSomeAvg10", device=device, value=1.0)] * 2,
    )
    with pytest.raises(InvalidSample) as err:
        codec.sample_from_proto(s)
    assert err.value.reason == "duplicate_signal"


def test_batch_and_ack_helpers() -> None:
    batch = codec.batch_to_proto(
        [Sample("a", 1.0, {}), Sample("b", 2.0, {})], collector="sim", sequence=9, dropped_since_last=2
    )
    assert [s.node for s in batch.samples] == ["a", "b"]
    assert batch.sequence == 9
    ack = codec.ack(9, 1, 1, ["out_of_range: x"]).ack
    assert (ack.sequence, ack.accepted, ack.rejected, list(ack.reject_reasons)) == (9, 1, 1, ["out_of_range: x"])
    assert codec.set_interval(500).set_interval.interval_ms == 500
