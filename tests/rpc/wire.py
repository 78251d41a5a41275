"""Model samples encoded for the stream, as a collector would send them (tests and benches
speak in model samples; the collector itself encodes its own, :mod:`mco_py.collector.stream`).
The inverse of :func:`mco_py.rpc.codec.sample_from_proto`."""

from __future__ import annotations

from collections.abc import Iterable

from mco_py.model import Sample, SignalReading
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb
from mco_py.rpc.codec import ABSENCE_LABELS, NANOS

_LABEL_KINDS = {label: kind for kind, label in ABSENCE_LABELS.items()}


def signal_to_proto(reading: SignalReading, *, device: str = "") -> pb.Signal:
    """Encode one reading (the inverse of :func:`signal_from_proto`)."""
    msg = pb.Signal(name=reading.name, device=device, backend=reading.backend)
    if reading.events is not None:
        msg.events = reading.events
    if reading.value is not None:
        msg.value = reading.value
        return msg
    label, sep, rest = reading.reason.partition(": ")
    kind = _LABEL_KINDS.get(label if sep else reading.reason)
    if kind is None:
        msg.absent.CopyFrom(pb.Absence(kind=pb.ABSENCE_KIND_UNSPECIFIED, reason=reading.reason))
    else:
        msg.absent.CopyFrom(pb.Absence(kind=kind, reason=rest if sep else ""))
    return msg


def sample_to_proto(sample: Sample, *, interval_ms: int = 0) -> pb.Sample:
    """Encode one sample for the stream."""
    return pb.Sample(
        node=sample.node,
        timestamp_unix_nanos=round(sample.timestamp * NANOS),
        signals=[signal_to_proto(r) for r in sample.signals.values()],
        interval_ms=interval_ms,
    )


def batch_to_proto(
    samples: Iterable[Sample],
    *,
    collector: str,
    sequence: int,
    collector_version: str = "",
    dropped_since_last: int = 0,
    interval_ms: int = 0,
) -> pb.SampleBatch:
    """A batch of samples (possibly for several nodes)."""
    return pb.SampleBatch(
        collector=collector,
        collector_version=collector_version,
        sequence=sequence,
        samples=[sample_to_proto(s, interval_ms=interval_ms) for s in samples],
        dropped_since_last=dropped_since_last,
    )
