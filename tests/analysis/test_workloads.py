"""Workload classes of pods and where the kubelet puts their cgroups (pure)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mco_py.analysis.guard import Action, GuardChange, change_text, event_reason
from mco_py.analysis.rules import parse_rules, rules_from_mapping, rules_to_mapping
from mco_py.analysis.workloads import (
    CLASS_LABEL,
    QOS_CLASSES,
    WorkloadPolicy,
    is_critical,
    pod_from_object,
    pod_group,
    workload_class,
)
from mco_py.analyzer.workloads import shrink
from mco_py.errors import RulesError

POLICY = WorkloadPolicy()
UID = "6f2c1a4e-0b7d-4c1e-9a55-3d0e7f1b2c9a"


@pytest.mark.parametrize(
    ("labels", "qos", "runtime", "expected"),
    [
        ({}, "BestEffort", "", "offline"),
        ({}, "Burstable", "", "online"),
        ({}, "Guaranteed", "", "online"),
        ({}, "Guaranteed", "kata-qemu", "offline"),
        ({}, "Burstable", "runc", "online"),
        ({CLASS_LABEL: "online"}, "BestEffort", "kata-qemu", "online"),
        ({CLASS_LABEL: "offline"}, "Guaranteed", "", "offline"),
        ({CLASS_LABEL: "batch"}, "Burstable", "", "online"),  # not a class: the defaults decide
    ],
)
def test_the_label_wins_then_qos_and_runtime_class(
    labels: dict[str, str], qos: str, runtime: str, expected: str
) -> None:
    assert workload_class(labels, qos, runtime, POLICY) == expected


def test_critical_pods_are_online_unless_labelled_offline() -> None:
    """Cluster add-ons (Volcano's scheduler and controllers) run BestEffort at a system priority:
    the guard must never throttle them as batch work."""
    assert workload_class({}, "BestEffort", "", POLICY, critical=True) == "online"
    assert workload_class({}, "BestEffort", "kata-qemu", POLICY, critical=True) == "online"
    assert workload_class({CLASS_LABEL: "offline"}, "BestEffort", "", POLICY, critical=True) == "offline"
    assert is_critical({"priorityClassName": "system-cluster-critical"})
    assert is_critical({"priorityClassName": "system-node-critical"})
    assert is_critical({"priority": 2_000_000_000})  # as the Priority admission plugin fills it in
    assert not is_critical({"priority": 1_000_000_000, "priorityClassName": "high"})
    assert not is_critical({"priority": True})
    assert not is_critical({})
    volcano = _pod(
        spec={"nodeName": "worker-1", "priorityClassName": "system-cluster-critical", "priority": 2000000000}
    )
    node, pod = pod_from_object(volcano, POLICY) or ("", None)
    assert (node, pod.cls if pod else None) == ("worker-1", "online")
    # the analyzer keeps only what pod_from_object reads: its slim copy gives the same answer
    by_priority = {**volcano, "spec": {"nodeName": "worker-1", "priority": 2000000001}}
    for full in (volcano, by_priority):
        assert pod_from_object(shrink(full), POLICY) == pod_from_object(full, POLICY)
        assert (pod_from_object(shrink(full), POLICY) or ("", None))[1].cls == "online"  # type: ignore[union-attr]


def test_the_policy_is_overridable() -> None:
    policy = WorkloadPolicy(offline_qos_classes=("BestEffort", "Burstable"), offline_runtime_classes=("gvisor",))
    assert workload_class({}, "Burstable", "", policy) == "offline"
    assert workload_class({}, "Guaranteed", "kata-qemu", policy) == "online"
    assert workload_class({}, "Guaranteed", "gvisor", policy) == "offline"


@pytest.mark.parametrize(
    ("qos", "driver", "path"),
    [
        (
            "BestEffort",
            "systemd",
            f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID.replace('-', '_')}.slice",
        ),
        (
            "Burstable",
            "systemd",
            f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}.slice",
        ),
        ("Guaranteed", "systemd", f"kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice"),
        ("BestEffort", "cgroupfs", f"kubepods/besteffort/pod{UID}"),
        ("Burstable", "cgroupfs", f"kubepods/burstable/pod{UID}"),
        ("Guaranteed", "cgroupfs", f"kubepods/pod{UID}"),
    ],
)
def test_pod_groups_as_the_kubelet_names_them(qos: str, driver: str, path: str) -> None:
    assert pod_group(UID, qos, driver) == path


@given(st.text(max_size=80), st.sampled_from(QOS_CLASSES), st.sampled_from(("systemd", "cgroupfs")))
def test_no_uid_escapes_the_kubepods_tree(uid: str, qos: str, driver: str) -> None:
    try:
        path = pod_group(uid, qos, driver)
    except ValueError:
        return
    parts = path.split("/")
    assert parts[0] in ("kubepods", "kubepods.slice")
    assert all(p and p not in (".", "..") for p in parts)


def test_unknown_qos_or_driver_is_refused() -> None:
    with pytest.raises(ValueError, match="QoS class"):
        pod_group(UID, "Premium", "systemd")
    with pytest.raises(ValueError, match="driver"):
        pod_group(UID, "BestEffort", "docker")


def _pod(**over: object) -> dict[str, object]:
    pod: dict[str, object] = {
        "metadata": {"namespace": "batch", "name": "job-1", "uid": str(uuid.uuid4()), "labels": {}},
        "spec": {"nodeName": "worker-1"},
        "status": {"phase": "Running", "qosClass": "BestEffort"},
    }
    pod.update(over)
    return pod


def test_pods_from_objects_skip_unbound_finished_and_unplaceable_ones() -> None:
    node, pod = pod_from_object(_pod(), POLICY) or ("", None)
    assert node == "worker-1"
    assert pod is not None
    assert pod.cls == "offline"
    assert pod.qos == "BestEffort"
    assert pod_from_object(_pod(spec={}), POLICY) is None
    assert pod_from_object(_pod(status={"phase": "Succeeded", "qosClass": "BestEffort"}), POLICY) is None
    assert pod_from_object(_pod(status={"phase": "Running"}), POLICY) is None
    assert pod_from_object(_pod(metadata={"uid": "../../etc"}), POLICY) is None


RULES = "format: 2\nversion: x\ndimensions: {cpu: {signals: {psiCpuSomeRate: {warn: 1, critical: 2}}}}\n"


def test_the_guard_section_of_the_rules_is_validated_and_round_trips() -> None:
    rules = parse_rules(RULES + "guard: {throttleAbove: 15, ioTarget: 4.5, offlineRuntimeClasses: [kata-*, gvisor]}\n")
    assert rules.guard is not None
    assert (rules.guard.throttle_above, rules.guard.io_target, rules.guard.io_floor) == (15, 4.5, 0.02)
    assert rules.workloads.offline_runtime_classes == ("kata-*", "gvisor")
    assert rules_from_mapping(rules_to_mapping(rules)) == rules
    assert parse_rules(RULES).guard is None, "no section: collectors keep their own rules"
    with pytest.raises(RulesError) as err:
        parse_rules(
            RULES + "guard: {releaseBelow: 50, calmIntervals: 0, offlineQosClasses: [Gold], bogus: 1, ioTarget: 0}\n"
        )
    text = str(err.value)
    for needed in (
        "ioTarget (0) must be above 0",
        "guard.bogus: unknown key",
        "guard.calmIntervals",
        "'Gold' is not a QoS class",
        "releaseBelow (50)",
    ):
        assert needed in text


def test_event_texts_name_the_resource_and_the_limit() -> None:
    cpu = GuardChange("n", 0.0, Action.THROTTLE, None, 0.5, 34.0, 2)
    assert change_text(cpu) == (
        "OfflineCPUThrottled",
        "offline workloads' CPU limited to 1.00 of 2 CPUs (was unlimited): online CPU pressure 34.0 %",
    )
    io = GuardChange("n", 0.0, Action.RELEASE, 0.9, None, None, 2, True, "io")
    reason, text = change_text(io)
    assert reason == "OfflineIOReleased"
    assert text.startswith("dry-run, nothing changed: would have offline workloads' I/O allowed unlimited (was 90 %")
    assert event_reason("memory", Action.RELAX) == "OfflineMemoryRelaxed"
