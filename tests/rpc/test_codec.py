"""Protobuf <-> model: round trips, absence kinds, per-device folding, duplicates."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mco_py.analysis.samples import InvalidSample
from mco_py.errors import ConfigError
from mco_py.model import SIGNAL_NAMES, Sample, SignalReading
from mco_py.rpc import codec
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb
from tests.rpc import wire

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
    sample = Sample.of(node, ts_ms / 1000, items)
    data = wire.sample_to_proto(sample).SerializeToString()
    back = codec.sample_from_proto(pb.Sample.FromString(data))
    assert back.node == sample.node
    assert math.isclose(back.timestamp, sample.timestamp, abs_tol=1e-6)
    assert (back.values, back.events, back.absent) == (sample.values, sample.events, sample.absent)


def test_absence_kind_travels_as_reason_prefix() -> None:
    msg = pb.Signal(
        name="llcMissRate", backend="perf", absent=pb.Absence(kind=pb.ABSENCE_KIND_UNSUPPORTED, reason="no PMU")
    )
    reading = codec.signal_from_proto(msg)
    assert reading.value is None
    assert reading.reason == "unsupported: no PMU"
    again = wire.signal_to_proto(reading)
    assert again.absent.kind == pb.ABSENCE_KIND_UNSUPPORTED
    assert again.absent.reason == "no PMU"


def test_zero_is_a_value_and_missing_oneof_is_absent() -> None:
    s = pb.Sample(node="n", signals=[pb.Signal(name="oomKills", value=0.0), pb.Signal(name="psiIoSomeAvg10")])
    sample = codec.sample_from_proto(s)
    assert sample.values == {"oomKills": 0.0}
    assert sample.absent == {"psiIoSomeAvg10": "no value sent"}


def test_per_device_readings_fold_to_the_worst() -> None:
    s = pb.Sample(
        node="n",
        signals=[
            pb.Signal(name="bioLatencyP99Ms", device="vda", value=3.0, events=100),
            pb.Signal(name="bioLatencyP99Ms", device="vdb", value=30.0, events=50),
            pb.Signal(name="bioLatencyP99Ms", device="vdc", absent=pb.Absence(kind=pb.ABSENCE_KIND_INSUFFICIENT_DATA)),
        ],
    )
    sample = codec.sample_from_proto(s)
    assert (sample.values, sample.events, sample.absent) == ({"bioLatencyP99Ms": 30.0}, {"bioLatencyP99Ms": 50}, {})


def test_node_level_reading_wins_over_per_device_detail() -> None:
    s = pb.Sample(
        node="n",
        signals=[
            pb.Signal(name="bioLatencyP99Ms", device="vda", value=3.0, events=100),
            pb.Signal(name="bioLatencyP99Ms", value=4.0, events=150),
            pb.Signal(name="bioLatencyP99Ms", device="vdb", value=30.0, events=50),
        ],
    )
    sample = codec.sample_from_proto(s)
    assert (sample.values, sample.events) == ({"bioLatencyP99Ms": 4.0}, {"bioLatencyP99Ms": 150})


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
    batch = wire.batch_to_proto(
        [Sample("a", 1.0, {}), Sample("b", 2.0, {})], collector="sim", sequence=9, dropped_since_last=2
    )
    assert [s.node for s in batch.samples] == ["a", "b"]
    assert batch.sequence == 9
    ack = codec.ack(9, 1, 1, ["out_of_range: x"]).ack
    assert (ack.sequence, ack.accepted, ack.rejected, list(ack.reject_reasons)) == (9, 1, 1, ["out_of_range: x"])
    assert codec.set_interval(500).set_interval.interval_ms == 500


def test_guard_messages_round_trip_and_bad_ones_are_refused() -> None:
    from mco_py.analysis.guard import Action, GuardChange, GuardRules
    from mco_py.analysis.workloads import WorkloadPod

    change = GuardChange("node-1", 1_800_000_000.5, Action.RELAX, 0.25, 0.35, 12.5, 8, True, "io")
    assert codec.guard_change_from_proto(codec.guard_change_to_proto(change)) == change
    released = GuardChange("node-1", 1_800_000_000.0, Action.RELEASE, 0.9, None, None, 8)
    assert codec.guard_change_from_proto(codec.guard_change_to_proto(released)) == released
    for bad in (
        pb.GuardAction(node="n", action="hold", limit_before=1, limit=1, cpus=2),
        pb.GuardAction(node="n", action="explode", limit_before=1, limit=0.5, cpus=2),
        pb.GuardAction(node="n", action="throttle", limit_before=1, limit=-3, cpus=2),
        pb.GuardAction(node="n", action="throttle", limit_before=1, limit=0.5, cpus=0),
        pb.GuardAction(node="n", action="throttle", limit_before=1, limit=0.5, cpus=2, resource="gpu"),
    ):
        with pytest.raises(ValueError, match="guard action"):
            codec.guard_change_from_proto(bad)
    rules = GuardRules(throttle_above=30, floor=0.2, io_target=5, io_floor=0.1)
    assert codec.guard_rules_from_proto(codec.guard_rules_to_proto(rules).guard_rules) == rules
    older = pb.GuardRules(throttle_above=30, release_below=2, calm_intervals=3, step_down=0.5, step_up=0.1, floor=0.2)
    assert codec.guard_rules_from_proto(older) == GuardRules(throttle_above=30, floor=0.2), (
        "an analyzer from before the I/O setpoint: the collector's defaults for it"
    )
    with pytest.raises(ConfigError):
        codec.guard_rules_from_proto(pb.GuardRules())  # all zero: not valid rules
    pod = WorkloadPod("ns", "p", "0b5e6a10-1111-4c1e-9a55-3d0e7f1b2c9a", "BestEffort", "offline")
    message = codec.workloads_to_proto("node-1", [pod]).workloads
    message.pods.append(pb.WorkloadPod(namespace="ns", name="evil", uid="../../x", qos_class="BestEffort"))
    pods, problems = codec.workloads_from_proto(message)
    assert pods == [pod]
    assert len(problems) == 1
    assert "evil" in problems[0]
