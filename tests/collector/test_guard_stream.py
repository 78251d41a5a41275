"""The guard and the analyzer over a real gRPC stream: the analyzer's guard rules (also after a
rules change) and the node's pods reach the collector's guard, and the guard's changes come back
for the Node Events, only for the stream's own node."""

from __future__ import annotations

import copy
import dataclasses
import time
import uuid
from pathlib import Path

from prometheus_client import CollectorRegistry

from mco_py.analysis.guard import Action, GuardChange, GuardRules
from mco_py.analyzer.engine import Engine
from mco_py.analyzer.metrics import AnalyzerMetrics
from mco_py.analyzer.service import create_server
from mco_py.analyzer.workloads import WorkloadIndex
from mco_py.collector.guard.files import detect_layout
from mco_py.collector.guard.loop import NodeGuard
from mco_py.collector.signals import NodeSample, Reading
from mco_py.collector.stream import StreamFanout, apply_guard_control
from mco_py.collector.workload_groups import WorkloadGroups
from mco_py.config.collector import StreamSettings
from tests.collector.test_guard import v2_tree
from tests.collector.test_stream import FAST
from tests.rules_fixtures import quick_rules
from tests.waiting import wait_until


def api_pod(node: str, qos: str, *, label: str = "", runtime: str = "") -> dict[str, object]:
    return {
        "metadata": {
            "namespace": "ns",
            "name": f"p-{uuid.uuid4().hex[:6]}",
            "uid": str(uuid.uuid4()),
            "labels": {"mco.many-core.io/workload-class": label} if label else {},
        },
        "spec": {"nodeName": node, "runtimeClassName": runtime or None},
        "status": {"phase": "Running", "qosClass": qos},
    }


def test_rules_and_pods_go_down_the_stream_and_changes_come_back(tmp_path: Path) -> None:
    rules = dataclasses.replace(quick_rules(), guard=GuardRules(throttle_above=30, release_below=3))
    engine = Engine(rules, metrics=AnalyzerMetrics(CollectorRegistry()), identity="t")
    index = WorkloadIndex(lambda: engine.rules.workloads)
    pods = [api_pod("node-a", "BestEffort"), api_pod("node-a", "Burstable"), api_pod("node-b", "BestEffort")]
    index.changed({str(i): copy.deepcopy(p) for i, p in enumerate(pods)})
    posted: list[GuardChange] = []
    server, port = create_server(
        engine, listen="127.0.0.1:0", workloads=index, post_change=posted.append
    )  # fmt: skip
    root = v2_tree(tmp_path / "cg", ["kubepods.slice"])
    groups = WorkloadGroups((), (), driver="systemd")
    guard = NodeGuard(
        detect_layout(root),
        groups=groups,
        rules=GuardRules(),
        mode="dry-run",
        journal_path=tmp_path / "j",
        node="node-a",
        cpus=2,
    )  # fmt: skip
    made: list[GuardChange] = []  # changes as the guard would hand them over, one of them for another node

    def changes() -> list[GuardChange]:
        out = guard.take_changes() + made
        made.clear()
        return out

    fanout = StreamFanout(
        StreamSettings(analyzers=(f"127.0.0.1:{port}",), **FAST),  # type: ignore[arg-type]
        collector_id="node-a",
        on_guard=lambda control: apply_guard_control(guard, control),
        guard_changes=changes,
    )
    try:
        fanout.start()

        def publish() -> None:
            fanout.publish(NodeSample("node-a", time.time(), 1.0, (Reading("psiCpuSomeRate", 1.0, "procfs"),)))

        publish()
        wait_until(lambda: guard.rules.throttle_above == 30, what="the analyzer's guard rules")
        wait_until(lambda: groups.snapshot().pods == 2, what="node-a's pods (not node-b's)")
        view = groups.snapshot()
        assert len(view.offline) == 1
        assert len(view.online) == 1
        assert view.offline[0].startswith("kubepods.slice/kubepods-besteffort.slice/")
        # a rules change reaches the guard, and reclassifies the pods
        engine.set_rules(dataclasses.replace(rules, guard=GuardRules(throttle_above=40)))
        publish()
        wait_until(lambda: guard.rules.throttle_above == 40, what="the new guard rules")
        pods[1]["metadata"]["labels"] = {"mco.many-core.io/workload-class": "offline"}  # type: ignore[index]
        index.changed({str(i): copy.deepcopy(p) for i, p in enumerate(pods)})
        publish()
        wait_until(lambda: len(groups.snapshot().offline) == 2, what="the relabelled pod")
        # changes go back: the own node's are posted, another node's are refused
        made.append(GuardChange("node-a", time.time(), Action.THROTTLE, None, 0.5, 45.0, 2, True))
        made.append(GuardChange("node-b", time.time(), Action.THROTTLE, None, 0.5, 45.0, 2, True))
        publish()
        wait_until(lambda: len(posted) >= 1, what="the change posted")
        publish()
        time.sleep(0.3)
        assert [(c.node, c.action, c.limit, c.dry_run) for c in posted] == [("node-a", Action.THROTTLE, 0.5, True)]
    finally:
        fanout.close()
        server.stop(0)
