"""Model samples encoded for the stream, as a collector would send them, and handed to an
engine that way (tests and benches speak in model samples; the collector encodes its own,
:mod:`mco_py.collector.stream`). The inverse of :func:`mco_py.rpc.codec.sample_from_proto`."""

from __future__ import annotations

from collections.abc import Iterable

from mco_py.analyzer.engine import Engine, Outcome
from mco_py.model import Sample, SignalReading
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb
from mco_py.rpc.codec import ABSENCE_LABELS, NANOS

_LABEL_KINDS = {label: kind for kind, label in ABSENCE_LABELS.items()}


def _absence(reason: str) -> pb.Absence:
    label, sep, rest = reason.partition(": ")
    kind = _LABEL_KINDS.get(label if sep else reason)
    if kind is None:
        return pb.Absence(kind=pb.ABSENCE_KIND_UNSPECIFIED, reason=reason)
    return pb.Absence(kind=kind, reason=rest if sep else "")


def signal_to_proto(reading: SignalReading, *, device: str = "") -> pb.Signal:
    """Encode one reading (the inverse of :func:`~mco_py.rpc.codec.signal_from_proto`)."""
    msg = pb.Signal(name=reading.name, device=device, backend=reading.backend)
    if reading.events is not None:
        msg.events = reading.events
    if reading.value is not None:
        msg.value = reading.value
    else:
        msg.absent.CopyFrom(_absence(reading.reason))
    return msg


def sample_to_proto(sample: Sample, *, interval_ms: int = 0, backend: str = "", packed: bool = True) -> pb.Sample:
    """Encode one sample for the stream, as a collector does: the values without an event count
    packed (``packed=False``: one ``Signal`` each, the stream's first form; ``backend`` named
    in every signal)."""
    msg = pb.Sample(node=sample.node, timestamp_unix_nanos=round(sample.timestamp * NANOS), interval_ms=interval_ms)
    for name, value in sample.values.items():
        count = sample.events.get(name)
        if packed and count is None:
            msg.value_names.append(name)
            msg.values.append(value)
            continue
        signal = msg.signals.add(name=name, value=value, backend=backend)
        if count is not None:
            signal.events = count
    msg.signals.extend(pb.Signal(name=n, backend=backend, absent=_absence(why)) for n, why in sample.absent.items())
    return msg


def batch_to_proto(
    samples: Iterable[Sample],
    *,
    collector: str,
    sequence: int,
    collector_version: str = "",
    dropped_since_last: int = 0,
    interval_ms: int = 0,
    backend: str = "",
    packed: bool = True,
) -> pb.SampleBatch:
    """A batch of samples (possibly for several nodes)."""
    return pb.SampleBatch(
        collector=collector,
        collector_version=collector_version,
        sequence=sequence,
        samples=[sample_to_proto(s, interval_ms=interval_ms, backend=backend, packed=packed) for s in samples],
        dropped_since_last=dropped_since_last,
    )


def accept(
    engine: Engine, samples: Iterable[Sample], outcome: Outcome | None = None, **kwargs: frozenset[str] | None
) -> Outcome:
    """``samples`` sent to ``engine`` as a collector's stream sends them."""
    return engine.accept_messages([sample_to_proto(s) for s in samples], outcome or Outcome(), **kwargs)
