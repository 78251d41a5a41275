"""Decoding a sample (``codec.sample_from_proto``, the ingest hot path) against the plain way.

Hypothesis builds protobuf samples with everything the careful path exists for: repeated
signals and per-device series, packed values (also named again as a signal, or without a
value to pair with), absent and unset values, event counts, values that are
out of range or not finite and unknown signal names (the decoder passes values on as
they are: range and node checks are ``check_sample``'s). Both must give the same sample,
signals in the same order, or refuse it for the same reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from mco_py.analysis.rules import DetectionRules, default_rules
from mco_py.analysis.samples import InvalidSample
from mco_py.analyzer.engine import Engine, Outcome
from mco_py.analyzer.metrics import AnalyzerMetrics
from mco_py.model import SIGNAL_NAMES, Sample, SignalReading
from mco_py.rpc import codec
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb
from tests.analyzer.test_engine import T0, Clock

values = st.one_of(
    st.floats(min_value=0.0, max_value=120.0),
    st.sampled_from([0.0, 1.0, 100.0, 100.0001, -0.5, math.nan, math.inf, 3_600_001.0, 1e300]),
)
events = st.one_of(st.none(), st.sampled_from([0, 3, 19, 20, 500]))


@st.composite
def signals(draw: st.DrawFn) -> pb.Signal:
    name = draw(st.sampled_from((*SIGNAL_NAMES, "somethingNew")))
    msg = pb.Signal(name=name, device=draw(st.sampled_from(["", "", "vda", "vdb"])), backend="procfs")
    count = draw(events)
    if count is not None:
        msg.events = count
    kind = draw(st.sampled_from(["value", "value", "value", "absent", "unset"]))
    if kind == "value":
        msg.value = draw(values)
    elif kind == "absent":
        msg.absent.CopyFrom(pb.Absence(kind=draw(st.sampled_from([0, 1, 4])), reason=draw(st.sampled_from(["", "x"]))))
    return msg


@st.composite
def samples(draw: st.DrawFn) -> pb.Sample:
    node = draw(st.sampled_from(["node-a", "node-a", "node-b", "node-c", "Bad_Name", ""]))
    offset = draw(st.sampled_from([-400.0, -2.0, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 400.0]))
    signal_list = draw(
        st.one_of(
            st.lists(signals(), max_size=12),
            # the usual sample: every signal once, a value each
            st.lists(st.sampled_from((*SIGNAL_NAMES, "somethingNew")), unique=True, min_size=5).flatmap(
                lambda names: st.tuples(*(st.tuples(st.just(n), values, events) for n in names))
            ),
        )
    )
    msgs = []
    for item in signal_list:
        if isinstance(item, pb.Signal):
            msgs.append(item)
            continue
        name, value, count = item
        msg = pb.Signal(name=name, value=value, backend="procfs")
        if count is not None:
            msg.events = count
        msgs.append(msg)
    packed = draw(
        st.one_of(
            st.just([]),
            st.lists(st.tuples(st.sampled_from((*SIGNAL_NAMES, "somethingNew")), values), max_size=14),
        )
    )
    names, numbers = [n for n, _ in packed], [v for _, v in packed]
    unpaired = draw(st.sampled_from([0, 0, 0, 0, 0, 0, 1, -1]))  # a name or a value too many
    if unpaired > 0:
        names.append("psiCpuSomeAvg10")
    elif unpaired < 0:
        numbers.append(1.0)
    return pb.Sample(
        node=node,
        timestamp_unix_nanos=round((T0 + offset) * 1e9),
        signals=msgs,
        value_names=names,
        values=numbers,
    )


def plain_decode(msg: pb.Sample) -> Sample:
    """The sample of ``msg`` decoded the plain way: the packed values as node-level signals before the
    others, every signal read as a reading, devices folded."""
    if len(msg.value_names) != len(msg.values):
        raise InvalidSample("malformed_sample", "unpaired")
    every = [pb.Signal(name=n, value=v) for n, v in zip(msg.value_names, msg.values, strict=True)]
    every += msg.signals
    seen: set[tuple[str, str]] = set()
    node_level: dict[str, SignalReading] = {}
    devices: dict[str, list[SignalReading]] = {}
    for raw in every:
        if (raw.name, raw.device) in seen:
            raise InvalidSample("duplicate_signal", "twice")
        seen.add((raw.name, raw.device))
        reading = codec.signal_from_proto(raw)
        if raw.device:
            devices.setdefault(raw.name, []).append(reading)
        else:
            node_level[raw.name] = reading
    readings = []
    for name in dict.fromkeys(raw.name for raw in every):  # in the order they first came
        if name in node_level:
            readings.append(node_level[name])
            continue
        found = devices[name]
        present = [r for r in found if r.value is not None]
        # the worst device: the highest value (the first of equals), else the first absent one
        readings.append(max(present, key=lambda r: r.value or 0.0) if present else found[0])
    return Sample.of(msg.node, msg.timestamp_unix_nanos / 1e9, readings)


@settings(max_examples=500, deadline=None)
@given(msg=samples())
def test_decoding_equals_the_plain_decode(msg: pb.Sample) -> None:
    refused: str | None = None
    try:
        want = plain_decode(msg)
    except InvalidSample as exc:
        refused = exc.reason
    if refused is not None:
        with pytest.raises(InvalidSample) as raised:
            codec.sample_from_proto(msg)
        assert raised.value.reason == refused
        return
    got = codec.sample_from_proto(msg)
    assert (got.node, got.timestamp) == (want.node, want.timestamp)
    assert _same(got.values, want.values)
    assert (list(got.events.items()), list(got.absent.items())) == (
        list(want.events.items()),
        list(want.absent.items()),
    )


def _same(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    """Equal and in the same order (it is the order of the report's signals), NaN equal to NaN."""
    return list(a) == list(b) and all(a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a)


def make(rules: DetectionRules, clock: Clock) -> tuple[Engine, CollectorRegistry]:
    registry = CollectorRegistry()
    return Engine(rules, metrics=AnalyzerMetrics(registry), identity="t", clock=clock, max_nodes=3), registry


def test_hot_path_scores_the_usual_sample_and_rejects_the_rest() -> None:
    """The paths agree on something, not only on nothing: a batch with one good sample and known rejections."""
    clock = Clock()
    engine, _ = make(default_rules(), clock)
    good = pb.Sample(
        node="node-a",
        timestamp_unix_nanos=round(T0 * 1e9),
        signals=[pb.Signal(name=n, value=90.0 if n.startswith("psi") else 0.0) for n in SIGNAL_NAMES],
    )
    twice = pb.Sample(node="node-b", timestamp_unix_nanos=round(T0 * 1e9), signals=[good.signals[0], good.signals[0]])
    negative = pb.Sample(
        node="node-c", timestamp_unix_nanos=round(T0 * 1e9), signals=[pb.Signal(name="oomKills", value=-1)]
    )
    outcome = engine.accept_messages([good, twice, negative, good], Outcome())
    assert (outcome.accepted, outcome.rejected) == (1, 3)
    assert list(outcome.counts) == ["duplicate_signal", "negative_value", "out_of_order"]
    [entry] = engine.build_report().status.nodes
    assert entry.name == "node-a"
    assert entry.score > 0
    assert set(entry.signals or ()) == set(SIGNAL_NAMES)
