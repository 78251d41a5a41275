"""The analyzer's side of the collector -> analyzer stream: samples decoded into the model,
and the control messages (acks, send-early thresholds, guard rules, workloads) encoded.

Decoding never trusts the peer: structural problems raise :class:`InvalidSample` with a
reason code from :data:`mco_py.analysis.samples.REJECT_REASONS`; value checks (ranges,
clock) are :func:`mco_py.analysis.samples.check_sample`'s job. The collector encodes its
own samples (:mod:`mco_py.collector.stream`).

Absence kinds travel in the model as a prefix of ``SignalReading.reason``
(``"unsupported: no PMU"``, :data:`ABSENCE_LABELS`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping

from mco_py.analysis.guard import RESOURCES, Action, GuardChange, GuardRules
from mco_py.analysis.samples import MAX_VALUES, InvalidSample
from mco_py.analysis.workloads import QOS_CLASSES, WorkloadPod, valid_uid
from mco_py.model import Sample, SignalReading
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb

#: Absence kind -> the label used as the reason prefix in the model.
ABSENCE_LABELS: dict[pb.AbsenceKind.ValueType, str] = {
    pb.ABSENCE_KIND_UNSUPPORTED: "unsupported",
    pb.ABSENCE_KIND_PERMISSION: "permission",
    pb.ABSENCE_KIND_READ_ERROR: "read error",
    pb.ABSENCE_KIND_INSUFFICIENT_DATA: "insufficient data",
    pb.ABSENCE_KIND_DISABLED: "disabled",
    pb.ABSENCE_KIND_WARMING_UP: "warming up",
}

NANOS = 1_000_000_000

_new = object.__new__
_slots = SignalReading.__dict__
_set_name, _set_value, _set_backend, _set_reason, _set_events = (
    _slots[f].__set__ for f in ("name", "value", "backend", "reason", "events")
)


def _present(name: str, value: float, backend: str, events: int | None) -> SignalReading:
    """``SignalReading(name, value, backend, "", events)`` without the frozen-dataclass ``__init__``.

    Ingest builds nine of these per sample; filling the slots directly costs about half.
    Equality with the normal constructor is covered by the codec round-trip tests.
    """
    reading: SignalReading = _new(SignalReading)
    _set_name(reading, name)
    _set_value(reading, value)
    _set_backend(reading, backend)
    _set_reason(reading, "")
    _set_events(reading, events)
    return reading


def _absence_reason(absent: pb.Absence) -> str:
    label = ABSENCE_LABELS.get(absent.kind)
    if label is None:
        return absent.reason
    return f"{label}: {absent.reason}" if absent.reason else label


def signal_from_proto(msg: pb.Signal) -> SignalReading:
    """One signal; an unset oneof is an absent signal with reason "unspecified"."""
    events = msg.events if msg.HasField("events") else None
    which = msg.WhichOneof("value_or_absence")
    if which == "value":
        return SignalReading(name=msg.name, value=msg.value, backend=msg.backend, events=events)
    if which == "absent":
        return SignalReading(
            name=msg.name, value=None, backend=msg.backend, reason=_absence_reason(msg.absent), events=events
        )
    return SignalReading(name=msg.name, value=None, backend=msg.backend, reason="no value sent", events=events)


def sample_from_proto(msg: pb.Sample) -> Sample:
    """Decode one sample.

    Per-device readings of one signal (``device`` set, e.g. one ``bioLatencyP99Ms`` per
    disk) are detail: the node-level reading (no device) is the signal. Without one,
    the devices are folded into the worst (highest value), since the node is judged as
    a whole. The same signal twice for the same device raises ``duplicate_signal``.
    """
    signals: dict[str, SignalReading] = {}
    for raw in msg.signals:
        name = raw.name
        if name in signals:
            # several readings of one signal: per-device series (rare), decoded carefully
            return _sample_with_devices(msg)
        # the common case stays tight: ingest decodes every signal of every sample
        if raw.WhichOneof("value_or_absence") == "value":
            signals[name] = _present(name, raw.value, raw.backend, raw.events if raw.HasField("events") else None)
        else:
            signals[name] = signal_from_proto(raw)
    return Sample(node=msg.node, timestamp=msg.timestamp_unix_nanos / NANOS, signals=signals)


SampleParts = tuple[str, float, dict[str, float], dict[str, int] | None, list[SignalReading]]
"""What the scorer needs of a sample: node, time, present values, their event counts (None when no
signal sent one), absent readings — see :meth:`mco_py.analysis.scoring.Scorer.observe_values`."""

_LARGEST = sys.float_info.max  # as in check_sample: infinity is out of range


def sample_parts(msg: pb.Sample) -> SampleParts | None:
    """The ingest hot path: a sample's parts without a :class:`Sample` or a reading per present signal.

    None when the sample must go the careful way (:func:`sample_from_proto`, then
    :func:`~mco_py.analysis.samples.check_sample`), which decides how it is rejected: a
    signal sent twice (per-device series or a duplicate), or a value that fails the range
    check (negative, above its maximum, not finite). So a sample this accepts decodes to
    the same sample and passes the same signal checks; node name and time are left to
    :func:`~mco_py.analysis.samples.check_head`.
    """
    values: dict[str, float] = {}
    events: dict[str, int] | None = None
    absent: list[SignalReading] = []
    limits = MAX_VALUES
    for raw in msg.signals:
        name = raw.name
        if raw.WhichOneof("value_or_absence") == "value":
            value = raw.value
            if name in values or not 0.0 <= value <= limits.get(name, _LARGEST):
                return None
            values[name] = value
            if raw.HasField("events"):
                if events is None:
                    events = {}
                events[name] = raw.events
        else:
            absent.append(signal_from_proto(raw))
    if absent and (len({r.name for r in absent}) < len(absent) or any(r.name in values for r in absent)):
        return None
    return msg.node, msg.timestamp_unix_nanos / NANOS, values, events, absent


def _sample_with_devices(msg: pb.Sample) -> Sample:
    node_level: dict[str, SignalReading] = {}
    worst_device: dict[str, SignalReading] = {}
    seen: set[tuple[str, str]] = set()
    for raw in msg.signals:
        name = raw.name
        key = (name, raw.device)
        if key in seen:
            where = f"{name} (device {raw.device})" if raw.device else name
            raise InvalidSample("duplicate_signal", f"node {msg.node}: signal {where} appears twice in one sample")
        seen.add(key)
        reading = signal_from_proto(raw)
        if not raw.device:
            node_level[name] = reading
            continue
        have = worst_device.get(name)
        if have is None or (reading.value is not None and (have.value is None or reading.value > have.value)):
            worst_device[name] = reading
    signals = worst_device | node_level
    return Sample(node=msg.node, timestamp=msg.timestamp_unix_nanos / NANOS, signals=signals)


def ack(sequence: int, accepted: int, rejected: int, reasons: Iterable[str] = ()) -> pb.Control:
    """The analyzer's answer to one batch."""
    return pb.Control(ack=pb.Ack(sequence=sequence, accepted=accepted, rejected=rejected, reject_reasons=list(reasons)))


def send_early(above: Mapping[str, float]) -> pb.Control:
    """Tell the collector which signal values make a sample worth sending at once."""
    return pb.Control(send_early=pb.SendEarly(above=dict(above)))


def set_interval(interval_ms: int) -> pb.Control:
    """Ask the collector to change its sample interval."""
    return pb.Control(set_interval=pb.SetInterval(interval_ms=interval_ms))


#: Guard changes one batch carries at most; the analyzer posts one Event each and ignores the rest.
MAX_GUARD_ACTIONS = 64


def guard_rules_to_proto(rules: GuardRules) -> pb.Control:
    """The node guard's rules of the detection rules in force, for every collector."""
    return pb.Control(
        guard_rules=pb.GuardRules(
            throttle_above=rules.throttle_above,
            release_below=rules.release_below,
            calm_intervals=rules.calm_intervals,
            step_down=rules.step_down,
            step_up=rules.step_up,
            floor=rules.floor,
        )
    )


def guard_rules_from_proto(msg: pb.GuardRules) -> GuardRules:
    """The guard rules an analyzer sent; raises ConfigError when they are not valid."""
    return GuardRules(
        throttle_above=msg.throttle_above,
        release_below=msg.release_below,
        calm_intervals=msg.calm_intervals,
        step_down=msg.step_down,
        step_up=msg.step_up,
        floor=msg.floor,
    )


def workloads_to_proto(node: str, pods: Iterable[WorkloadPod]) -> pb.Control:
    """The pods of ``node`` with their class, for its collector's guard."""
    return pb.Control(
        workloads=pb.NodeWorkloads(
            node=node,
            pods=[
                pb.WorkloadPod(
                    namespace=p.namespace, name=p.name, uid=p.uid, qos_class=p.qos, offline=p.cls == "offline"
                )
                for p in pods
            ],
        )
    )


def workloads_from_proto(msg: pb.NodeWorkloads) -> tuple[list[WorkloadPod], list[str]]:
    """The pods an analyzer sent, and one problem per pod left out (a UID or QoS class that
    cannot name a cgroup)."""
    pods: list[WorkloadPod] = []
    problems: list[str] = []
    for p in msg.pods:
        if not valid_uid(p.uid) or p.qos_class not in QOS_CLASSES:
            problems.append(f"pod {p.namespace[:63]}/{p.name[:253]}: UID {p.uid[:64]!r}, QoS {p.qos_class[:20]!r}")
            continue
        pods.append(WorkloadPod(p.namespace, p.name, p.uid, p.qos_class, "offline" if p.offline else "online"))
    return pods, problems


def guard_change_to_proto(change: GuardChange) -> pb.GuardAction:
    """One limit change of the node guard, for the analyzer's Event."""
    msg = pb.GuardAction(
        node=change.node,
        timestamp_unix_nanos=int(change.time * 1e9),
        action=change.action.value,
        limit_before=1.0 if change.limit_before is None else change.limit_before,
        limit=1.0 if change.limit is None else change.limit,
        cpus=change.cpus,
        dry_run=change.dry_run,
        resource=change.resource,
    )
    if change.pressure is not None:
        msg.pressure = change.pressure
    return msg


def guard_change_from_proto(msg: pb.GuardAction) -> GuardChange:
    """A change a collector reported; raises ValueError saying why it is not one."""
    try:
        action = Action(msg.action)
    except ValueError:
        raise ValueError(f"guard action {msg.action[:40]!r} is not one of throttle, relax, release") from None
    resource = msg.resource or "cpu"
    if resource not in RESOURCES:
        raise ValueError(f"guard action on {msg.resource[:20]!r}; expected one of {', '.join(RESOURCES)}")
    limits = (msg.limit_before, msg.limit)
    if action is Action.HOLD or not all(math.isfinite(v) and 0 < v <= 1 for v in limits) or not 0 < msg.cpus < 1 << 20:
        raise ValueError("guard action with a limit outside (0, 1] or no CPUs")
    pressure = msg.pressure if msg.HasField("pressure") and math.isfinite(msg.pressure) else None
    return GuardChange(
        node=msg.node,
        time=msg.timestamp_unix_nanos / 1e9,
        action=action,
        limit_before=None if msg.limit_before >= 1 else msg.limit_before,
        limit=None if msg.limit >= 1 else msg.limit,
        pressure=pressure,
        cpus=msg.cpus,
        dry_run=msg.dry_run,
        resource=resource,
    )
