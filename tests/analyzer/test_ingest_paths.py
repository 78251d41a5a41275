"""The ingest hot path (``Engine.accept_messages``) against the plain one (decode every sample, then ``accept``).

Hypothesis builds protobuf batches with everything the careful path exists for: repeated
signals and per-device series, absent and unset values, event counts below ``minEvents``,
values out of range or not finite, unknown signal names, bad node names, clock skew,
reordered samples and nodes the client certificate does not allow. Both paths must give
the same acks (counts and reasons, in order), the same metrics and the same reports.
"""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from mco_py.analysis.rules import DetectionRules, Smoothing, default_rules
from mco_py.analysis.samples import REJECT_REASONS, InvalidSample
from mco_py.analyzer.engine import Engine, Outcome
from mco_py.analyzer.metrics import AnalyzerMetrics
from mco_py.model import SIGNAL_NAMES
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
    return pb.Sample(node=node, timestamp_unix_nanos=round((T0 + offset) * 1e9), signals=msgs)


batches = st.lists(
    st.tuples(st.lists(samples(), max_size=8), st.sampled_from([0.0, 1.0, 5.0, 40.0])),
    min_size=1,
    max_size=5,
)


def make(rules: DetectionRules, clock: Clock) -> tuple[Engine, CollectorRegistry]:
    registry = CollectorRegistry()
    return Engine(rules, metrics=AnalyzerMetrics(registry), identity="t", clock=clock, max_nodes=3), registry


def plain(engine: Engine, messages: list[pb.Sample], allowed: frozenset[str] | None) -> Outcome:
    """What the servicer did before the hot path: decode the whole batch, then accept."""
    outcome = Outcome()
    decoded = []
    for raw in messages:
        try:
            decoded.append(codec.sample_from_proto(raw))
        except InvalidSample as exc:
            outcome.reject(exc)
    return engine.accept(decoded, outcome, allowed_nodes=allowed)


def counted(registry: CollectorRegistry) -> dict[str, float]:
    out = {
        "accepted": registry.get_sample_value("mco_analyzer_samples_total", {"result": "accepted", "reason": "none"})
    }
    for reason in REJECT_REASONS:
        out[reason] = registry.get_sample_value("mco_analyzer_samples_total", {"result": "rejected", "reason": reason})
    return {k: v or 0.0 for k, v in out.items()}


@settings(max_examples=150, deadline=None)
@given(
    batches=batches,
    window=st.booleans(),
    allowed=st.sampled_from([None, frozenset({"node-a", "node-b"})]),
)
def test_hot_path_equals_decode_then_accept(
    batches: list[tuple[list[pb.Sample], float]], window: bool, allowed: frozenset[str] | None
) -> None:
    rules = default_rules()
    if window:
        rules = dataclasses.replace(rules, smoothing=Smoothing(method="window", window=3))
    clock = Clock()
    fast, fast_registry = make(rules, clock)
    slow, slow_registry = make(rules, clock)
    for messages, advance in batches:
        clock.now += advance
        got = fast.accept_messages(messages, Outcome(), allowed_nodes=allowed)
        want = plain(slow, messages, allowed)
        assert (got.accepted, got.rejected, got.counts) == (want.accepted, want.rejected, want.counts)
        assert list(got.reasons.items()) == list(want.reasons.items())
        assert fast.build_report().status == slow.build_report().status
    assert counted(fast_registry) == counted(slow_registry)


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
    [entry] = engine.build_report().status["nodes"]  # type: ignore[index]
    assert entry["name"] == "node-a"
    assert entry["score"] > 0
    assert set(entry["signals"]) == set(SIGNAL_NAMES)
