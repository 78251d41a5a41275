"""The analyzer's side of the collector -> analyzer stream: samples decoded into the model,
and the control messages (features, acks, send-early thresholds, guard rules, workloads) encoded.

Decoding never trusts the peer: structural problems raise :class:`InvalidSample` with a
reason code from :data:`mco_py.analysis.samples.REJECT_REASONS`; value checks (ranges,
clock) are :func:`mco_py.analysis.samples.check_sample`'s job. The collector encodes its
own samples (:mod:`mco_py.collector.stream`).

Absence kinds travel in the model as a prefix of ``SignalReading.reason``
(``"unsupported: no PMU"``, :data:`ABSENCE_LABELS`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

from mco_py.analysis.guard import RESOURCES, Action, GuardChange, GuardRules
from mco_py.analysis.samples import InvalidSample
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


def _absence_reason(absent: pb.Absence) -> str:
    label = ABSENCE_LABELS.get(absent.kind)
    if label is None:
        return absent.reason
    return f"{label}: {absent.reason}" if absent.reason else label


def _why_absent(msg: pb.Signal) -> str:
    """The reason of a signal without a value; an unset oneof is "no value sent"."""
    return _absence_reason(msg.absent) if msg.HasField("absent") else "no value sent"


def signal_from_proto(msg: pb.Signal) -> SignalReading:
    """One signal: its value, or why it has none."""
    events = msg.events if msg.HasField("events") else None
    if msg.WhichOneof("value_or_absence") == "value":
        return SignalReading(name=msg.name, value=msg.value, backend=msg.backend, events=events)
    return SignalReading(name=msg.name, value=None, backend=msg.backend, reason=_why_absent(msg), events=events)


def sample_from_proto(msg: pb.Sample) -> Sample:
    """Decode one sample (the ingest hot path: every sample of every batch comes through here).

    The plain values come packed (``value_names``/``values``: one dict made in C) from
    collectors whose analyzer announced :func:`features`; everything else, and every value
    from older collectors, comes as one ``Signal`` each. Per-device readings of one signal
    (``device`` set, e.g. one ``bioLatencyP99Ms`` per disk) are detail: the node-level
    reading (no device) is the signal. Without one, the devices are folded into the worst
    (highest value), since the node is judged as a whole. The same signal twice for the
    same device raises ``duplicate_signal``; names and values that do not pair raise
    ``malformed_sample``.
    """
    names, packed = msg.value_names, msg.values
    if len(names) != len(packed):
        return _sample_with_devices(msg)  # names and values that do not pair: raises
    values: dict[str, float] = dict(zip(names, packed, strict=True)) if names else {}
    if len(values) != len(names):
        return _sample_with_devices(msg)  # a packed name twice: raises
    events: dict[str, int] = {}
    absent: dict[str, str] = {}
    for raw in msg.signals:
        name = raw.name
        if name in values or name in absent:
            return _sample_with_devices(msg)  # several readings of one signal: rare, decoded carefully
        if raw.WhichOneof("value_or_absence") == "value":
            values[name] = raw.value
            if raw.HasField("events"):
                events[name] = raw.events
        else:
            absent[name] = _why_absent(raw)
    return Sample(msg.node, msg.timestamp_unix_nanos / NANOS, values, events, absent)


def _readings(msg: pb.Sample) -> Iterator[tuple[str, SignalReading]]:
    """Every reading of ``msg`` with its device (empty: node level), the packed values first."""
    names, values = msg.value_names, msg.values
    if len(names) != len(values):
        raise InvalidSample(
            "malformed_sample", f"node {msg.node}: {len(names)} packed value names but {len(values)} values"
        )
    for name, value in zip(names, values, strict=True):
        yield "", SignalReading(name=name, value=value)
    for raw in msg.signals:
        yield raw.device, signal_from_proto(raw)


def _sample_with_devices(msg: pb.Sample) -> Sample:
    node_level: dict[str, SignalReading] = {}
    worst_device: dict[str, SignalReading] = {}
    seen: set[tuple[str, str]] = set()
    first: dict[str, None] = {}  # names in the order they first came, as the fast path keeps them
    for device, reading in _readings(msg):
        name = reading.name
        if (name, device) in seen:
            where = f"{name} (device {device})" if device else name
            raise InvalidSample("duplicate_signal", f"node {msg.node}: signal {where} appears twice in one sample")
        seen.add((name, device))
        first[name] = None
        if not device:
            node_level[name] = reading
            continue
        have = worst_device.get(name)
        if have is None or (reading.value is not None and (have.value is None or reading.value > have.value)):
            worst_device[name] = reading
    readings = (node_level.get(name) or worst_device[name] for name in first)
    return Sample.of(msg.node, msg.timestamp_unix_nanos / NANOS, readings)


def features() -> pb.Control:
    """What this analyzer reads beyond the stream's first version: its first message on a stream."""
    return pb.Control(features=pb.Features(packed_values=True))


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
            io_target=rules.io_target,
            io_floor=rules.io_floor,
        )
    )


def guard_rules_from_proto(msg: pb.GuardRules) -> GuardRules:
    """The guard rules an analyzer sent (an older analyzer's lack the I/O setpoint: the defaults);
    raises ConfigError when they are not valid."""
    defaults = GuardRules()
    return GuardRules(
        throttle_above=msg.throttle_above,
        release_below=msg.release_below,
        calm_intervals=msg.calm_intervals,
        step_down=msg.step_down,
        step_up=msg.step_up,
        floor=msg.floor,
        io_target=msg.io_target if msg.HasField("io_target") else defaults.io_target,
        io_floor=msg.io_floor if msg.HasField("io_floor") else defaults.io_floor,
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
