"""The sampler keeps every other source flowing when one breaks; the loop honours SetInterval."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mco_py.collector.psi import PsiSource
from mco_py.collector.sampler import SampleLoop, Sampler
from mco_py.collector.signals import Absence, NodeSample, Reading, Total
from mco_py.collector.stream import reading_to_proto
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb


class Exploding:
    group = "boom"
    backend = "test"

    def read(self, now: float) -> list[Reading]:
        raise ZeroDivisionError("bug in a source")

    def totals(self) -> list[Total]:
        return []

    def close(self) -> None:
        raise RuntimeError("close failed too")


def test_a_buggy_source_does_not_stop_the_others(host_tree: Path, caplog: pytest.LogCaptureFixture) -> None:
    ticks = iter(float(i) for i in range(100))
    sampler = Sampler(
        [Exploding(), PsiSource(host_tree / "proc")], node="n", clock=lambda: next(ticks), wall=lambda: 5.0
    )
    with caplog.at_level(logging.ERROR):
        samples = [sampler.sample() for _ in range(3)]
    last = samples[-1]
    boom = last.get("boom")
    assert boom is not None
    assert boom.absence is Absence.READ_ERROR
    assert "ZeroDivisionError" in boom.reason
    psi = last.get("psiIoSomeAvg10")
    assert psi is not None
    assert psi.present
    assert last.interval == 1.0
    assert last.backends == {"boom": "test", "psi": "procfs"}
    assert len([r for r in caplog.records if "source boom failed" in r.getMessage()]) == 1
    sampler.close()  # a failing close is logged, the others still close


def test_loop_publishes_after_the_first_sample_and_takes_new_intervals(host_tree: Path) -> None:
    sampler = Sampler([PsiSource(host_tree / "proc")], node="n")
    published: list[NodeSample] = []
    stop = threading.Event()

    def publish(sample: NodeSample) -> None:
        published.append(sample)
        if len(published) == 3:
            stop.set()

    loop = SampleLoop(sampler, interval_s=0.05, publish=publish, stop=stop)
    loop.set_interval(0.0)  # clamped to the minimum, not a busy loop
    loop.set_interval(0.02)
    thread = threading.Thread(target=loop.run)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert len(published) == 3
    assert all(s.interval > 0 for s in published)  # the priming sample is not sent


@given(
    st.text(min_size=1, max_size=20),
    st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
    st.sampled_from(list(Absence)),
    st.one_of(st.none(), st.integers(0, 2**63)),
)
def test_reading_to_proto(name: str, value: float | None, kind: Absence, events: int | None) -> None:
    reading = (
        Reading(name, value, "b", events=events)
        if value is not None
        else Reading.absent(name, "b", kind, "why", events=events)
    )
    signal = reading_to_proto(reading)
    assert signal.name == name
    if value is not None:
        assert signal.WhichOneof("value_or_absence") == "value"
        assert signal.value == value
    else:
        assert signal.WhichOneof("value_or_absence") == "absent"
        assert pb.AbsenceKind.Name(signal.absent.kind) == f"ABSENCE_KIND_{kind.name}"
        assert signal.absent.reason == "why"
    assert signal.HasField("events") == (events is not None)
