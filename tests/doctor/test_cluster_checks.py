"""``mco doctor --cluster``'s conclusions from what it read (pure), and its behaviour when the API
server is not there. Against the real kube-apiserver: tests/cluster_tests/test_mco_on_real_cluster.py."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from mco_py.doctor.checks import Check, Verdict
from mco_py.doctor.cluster_checks import ACCESS, GUARD_PODS_PROBE, access_table, judge_cluster
from mco_py.doctor.cluster_view import KATA_LABEL, KVM_LABEL, ClusterView, Read
from mco_py.doctor.main import mco_namespace
from mco_py.doctor.volcano_checks import go_duration_seconds
from mco_py.report.shards import shard_index
from tests.doctor.kubeconfigs import unreachable_kubeconfig
from tests.roles.helpers import load_module

NOW = 1_800_000_000.0
KATA = {KATA_LABEL: "true", KVM_LABEL: "true"}
KATA_NO_KVM = {KATA_LABEL: "true", KVM_LABEL: "false"}
TTL = 30.0


def rfc3339(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


MCO_IMAGE = "mco.many-core.io/vc-scheduler:v1.14.1-mco0.1.0"
UPSTREAM_IMAGE = "docker.io/volcanosh/vc-scheduler:v1.14.1"


def plugin_conf(*, extender: bool = False, **arguments: Any) -> Read:
    """Volcano's configuration with mco-plugin (and MCO's extender entry too, when asked)."""
    plugins: list[dict[str, Any]] = [
        {"name": "predicates"},
        {"name": "mco-plugin", "arguments": {"crName": "cluster", **arguments}},
    ]
    if extender:
        plugins.append(
            {"name": "extender", "arguments": {"extender.urlPrefix": "http://e.mco-system.svc:9879/volcano/v1.10"}}
        )
    conf = {"actions": "enqueue, allocate", "tiers": [{"plugins": [{"name": "gang"}]}, {"plugins": plugins}]}
    return Read({"data": {"volcano-scheduler.conf": yaml.safe_dump(conf)}})


def scheduler_image(image: str, *, annotated: str | None = None) -> Read:
    """The scheduler Deployment running ``image`` (annotated by the volcano role as its plugin image)."""
    meta = {"annotations": {"mco.many-core.io/plugin-image": annotated}} if annotated else {}
    return Read({"metadata": meta, "spec": {"template": {"spec": {"containers": [{"image": image}]}}}})


HTTPS_URL = "https://volcano:pw@mco-scheduler-extender.mco-system.svc:9879/volcano/v1.10"
SCHEDULER_FILTER = load_module("plugins/filter/volcano_scheduler.py", "volcano_scheduler")


def trusted() -> Read:
    """The scheduler Deployment as the volcano role leaves it for an HTTPS extender (its own filter's patch)."""
    deployment = {"spec": {"template": {"spec": {"containers": [
        {"name": "volcano-scheduler", "image": "docker.io/volcanosh/vc-scheduler:v1.12.4"}
    ]}}}}  # fmt: skip
    return Read(SCHEDULER_FILTER.scheduler_patched(deployment, "", "", "mco-extender-trust"))


def volcano_conf(**arguments: Any) -> Read:
    args = {
        "extender.urlPrefix": "http://mco-scheduler-extender.mco-system.svc:9879/volcano/v1.10",
        "extender.httpTimeout": "1s",
        "extender.predicateVerb": "predicate",
        "extender.prioritizeVerb": "prioritize",
        "extender.ignorable": True,
        **arguments,
    }
    args = {k: v for k, v in args.items() if v is not None}
    conf = {"actions": "enqueue, allocate", "tiers": [{"plugins": [{"name": "gang"}]}]}
    conf["tiers"].append({"plugins": [{"name": "predicates"}, {"name": "extender", "arguments": args}]})
    return Read({"data": {"volcano-scheduler.conf": yaml.safe_dump(conf)}})


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def healthy() -> ClusterView:
    return ClusterView(
        now=NOW,
        crd=Read({"status": {"conditions": [{"type": "Established", "status": "True"}]}}),
        report=Read(
            {
                "status": {
                    "lastUpdateTime": rfc3339(NOW - 3),
                    "analyzer": {"identity": "analyzer-0", "rulesVersion": "v7"},
                    "nodes": [{"name": "n1", "level": "Low", "score": 5}, {"name": "n2", "level": "High", "score": 5}],
                }
            }
        ),
        nodes=Read({"items": [node("n1"), node("n2", **KATA)]}),
        lease=Read(
            {"spec": {"holderIdentity": "analyzer-0", "renewTime": rfc3339(NOW - 2), "leaseDurationSeconds": 15}}
        ),
        volcano_conf=volcano_conf(),
        volcano_deployment=Read(
            {"spec": {"template": {"spec": {"containers": [{"image": "docker.io/volcanosh/vc-scheduler:v1.12.4"}]}}}}
        ),
        runtime_class=Read({"handler": "kata-qemu", "scheduling": {"nodeSelector": {KATA_LABEL: "true"}}}),
        access=[(q, q.expected, "") for q in ACCESS],
    )


def verdicts(checks: list[Check]) -> dict[str, tuple[Verdict, str]]:
    out: dict[str, tuple[Verdict, str]] = {}
    for check in checks:
        previous = out.get(check.name)
        if previous is None or check.verdict > previous[0]:
            out[check.name] = (check.verdict, check.detail)
    return out


def test_a_healthy_cluster_is_all_ok() -> None:
    got = verdicts(judge_cluster(healthy(), ttl=TTL))
    assert {name: v for name, (v, _) in got.items()} == {
        "report CRD": Verdict.OK,
        "cluster report": Verdict.OK,
        "nodes in the report": Verdict.OK,
        "analyzer leader": Verdict.OK,
        "volcano scheduler": Verdict.OK,
        "kata runtime": Verdict.OK,
        "rbac mco-analyzer": Verdict.OK,
        "rbac mco-scheduler-extender": Verdict.OK,
    }
    assert "written 3 s ago by analyzer-0 (TTL 30 s), rules v7" in got["cluster report"][1]
    assert "High: n2" in got["nodes in the report"][1]
    assert "Volcano v1.12.4" in got["volcano scheduler"][1]
    assert got["kata runtime"][1] == "1 Nodes run kata-qemu: n2"


def _status(view: ClusterView, **changes: Any) -> ClusterView:
    doc = json.loads(json.dumps(view.report.doc))
    doc["status"].update(changes)
    return replace(view, report=Read(doc))


@pytest.mark.parametrize(
    ("change", "name", "verdict", "says"),
    [
        (lambda v: replace(v, crd=Read()), "report CRD", Verdict.FAIL, "is not installed"),
        (lambda v: replace(v, crd=Read({"status": {}})), "report CRD", Verdict.FAIL, "not Established"),
        (lambda v: replace(v, report=Read()), "cluster report", Verdict.FAIL, "no analyzer has written one"),
        (lambda v: replace(v, report=Read(error="HTTP 403 Forbidden")), "cluster report", Verdict.FAIL, "HTTP 403"),
        (
            lambda v: _status(v, lastUpdateTime=rfc3339(NOW - 95)),
            "cluster report",
            Verdict.FAIL,
            "last written 95 s ago, beyond the extender's TTL (30 s)",
        ),
        (
            lambda v: replace(v, nodes=Read({"items": [node("n1"), node("n2", **KATA), node("n3")]})),
            "nodes in the report",
            Verdict.WARN,
            "1 of 3 Nodes have no entry (no collector data): n3",
        ),
        (
            lambda v: _status(
                v, nodes=[{"name": "n1", "level": "Unknown", "score": 5}, {"name": "n2", "level": "Low", "score": 5}]
            ),
            "nodes in the report",
            Verdict.WARN,
            "1 nodes are Unknown",
        ),
        (lambda v: replace(v, lease=Read()), "analyzer leader", Verdict.FAIL, "no cluster-mode analyzer has ever led"),
        (
            lambda v: replace(v, lease=Read({"spec": {"holderIdentity": "a-1", "renewTime": rfc3339(NOW - 40)}})),
            "analyzer leader",
            Verdict.FAIL,
            "a-1 held the Lease, last renewed 40 s ago (lease 15 s): no analyzer leads",
        ),
        (lambda v: replace(v, lease=Read({"spec": {}})), "analyzer leader", Verdict.FAIL, "no analyzer leads"),
        (
            lambda v: replace(v, volcano_conf=Read({"data": {"volcano-scheduler.conf": "tiers: [{plugins: []}]"}})),
            "volcano scheduler",
            Verdict.FAIL,
            "Volcano runs without MCO (no mco-plugin entry, no extender entry)",
        ),
        (
            lambda v: replace(v, volcano_conf=volcano_conf(**{"extender.ignorable": "true"})),
            "volcano scheduler",
            Verdict.FAIL,
            "ignorable must be the YAML bool true (is a string)",
        ),
        (
            lambda v: replace(v, volcano_conf=volcano_conf(**{"extender.httpTimeout": "200ms"})),
            "volcano scheduler",
            Verdict.FAIL,
            "httpTimeout 0.2 s is below 1 s",
        ),
        (
            lambda v: replace(v, volcano_conf=volcano_conf(**{"extender.httpTimeout": "1 second"})),
            "volcano scheduler",
            Verdict.FAIL,
            "is not a Go duration",
        ),
        (
            lambda v: replace(v, volcano_conf=volcano_conf(**{"extender.onSessionOpenVerb": "open"})),
            "volcano scheduler",
            Verdict.FAIL,
            "onSessionOpenVerb is set",
        ),
        (
            lambda v: replace(v, volcano_conf=volcano_conf(**{"extender.predicateVerb": "filter"})),
            "volcano scheduler",
            Verdict.FAIL,
            "predicateVerb must be 'predicate'",
        ),
        (
            lambda v: replace(v, volcano_conf=volcano_conf(**{"extender.urlPrefix": "http://other:80/x"})),
            "volcano scheduler",
            Verdict.FAIL,
            "is not MCO's",
        ),
        (
            lambda v: replace(
                v, volcano_conf=volcano_conf(**{"extender.urlPrefix": "http://e.mco-system.svc:9879/volcano/v1.9"})
            ),
            "volcano scheduler",
            Verdict.FAIL,
            "asks for Volcano 1.9's reply format but v1.12.4 runs",
        ),
        (lambda v: replace(v, volcano_conf=Read({"data": {}})), "volcano scheduler", Verdict.FAIL, "has no key"),
        (
            lambda v: replace(v, volcano_conf=Read({"data": {"volcano-scheduler.conf": "tiers: [unclosed"}})),
            "volcano scheduler",
            Verdict.FAIL,
            "is not YAML",
        ),
        (lambda v: replace(v, volcano_conf=Read()), "volcano scheduler", Verdict.OK, "no Volcano here"),
        (
            lambda v: replace(v, volcano_conf=plugin_conf(), volcano_deployment=scheduler_image(MCO_IMAGE)),
            "volcano scheduler",
            Verdict.OK,
            f"mco-plugin in {MCO_IMAGE}, Volcano v1.14.1",
        ),
        (
            lambda v: replace(v, volcano_conf=plugin_conf(), volcano_deployment=scheduler_image(UPSTREAM_IMAGE)),
            "volcano scheduler",
            Verdict.FAIL,
            f"the scheduler runs {UPSTREAM_IMAGE}, which has no mco-plugin",
        ),
        (
            lambda v: replace(
                v,
                volcano_conf=plugin_conf(),
                volcano_deployment=scheduler_image(
                    "registry.example/mco/vcs:7", annotated="registry.example/mco/vcs:7"
                ),
            ),
            "volcano scheduler",
            Verdict.OK,
            "mco-plugin in registry.example/mco/vcs:7",
        ),
        (
            lambda v: replace(
                v,
                volcano_conf=plugin_conf(crStatusTTLSeconds="thirty", listen=":1"),
                volcano_deployment=scheduler_image(MCO_IMAGE),
            ),
            "volcano scheduler",
            Verdict.FAIL,
            "mco-plugin ignores the argument(s) listen; mco-plugin arguments: crStatusTTLSeconds: expected float, "
            "got str 'thirty'",
        ),
        (
            lambda v: replace(
                v,
                volcano_conf=plugin_conf(herdGuard={"perPodScore": 5, "settleSeconds": 10}),
                volcano_deployment=scheduler_image(MCO_IMAGE),
            ),
            "volcano scheduler",
            Verdict.OK,
            "mco-plugin in",
        ),
        (
            lambda v: replace(
                v, volcano_conf=plugin_conf(herdGuard={"perPod": 5}), volcano_deployment=scheduler_image(MCO_IMAGE)
            ),
            "volcano scheduler",
            Verdict.FAIL,
            "herdGuard must be null or a mapping of enabled, perPodScore, settleSeconds, maxAgeSeconds",
        ),
        (
            lambda v: replace(
                v, volcano_conf=plugin_conf(extender=True), volcano_deployment=scheduler_image(MCO_IMAGE)
            ),
            "volcano scheduler",
            Verdict.WARN,
            "an extender entry too",
        ),
        (
            lambda v: replace(v, volcano_conf=plugin_conf(), volcano_deployment=Read()),
            "volcano scheduler",
            Verdict.FAIL,
            "was not found: its image is not checked",
        ),
        (
            lambda v: replace(v, volcano_conf=volcano_conf(**{"extender.urlPrefix": HTTPS_URL})),
            "volcano scheduler",
            Verdict.WARN,
            "https://volcano:***@mco-scheduler-extender.mco-system.svc:9879/volcano/v1.10, Volcano v1.12.4: "
            "https://, but the scheduler container adds no CA to its system roots",
        ),
        (
            lambda v: replace(
                v, volcano_conf=volcano_conf(**{"extender.urlPrefix": HTTPS_URL}), volcano_deployment=trusted()
            ),
            "volcano scheduler",
            Verdict.OK,
            "Volcano v1.12.4, trusting ConfigMap mco-extender-trust",
        ),
        (
            lambda v: replace(v, runtime_class=Read({"handler": "kata-qemu"})),
            "kata runtime",
            Verdict.WARN,
            "has no scheduling.nodeSelector",
        ),
        (
            lambda v: replace(v, nodes=Read({"items": [node("n1"), node("n2")]})),
            "kata runtime",
            Verdict.FAIL,
            "no Node matches RuntimeClass kata-qemu's nodeSelector",
        ),
        (lambda v: replace(v, runtime_class=Read()), "kata runtime", Verdict.OK, "Kata isolation is off"),
        (
            lambda v: replace(v, nodes=Read({"items": [node("n1"), node("n2", **KATA_NO_KVM)]})),
            "kvm",
            Verdict.FAIL,
            "Kata Nodes without usable KVM (mco.many-core.io/kvm-ready=false): n2",
        ),
        (
            lambda v: replace(v, access=[(q, q.expected if q.verb != "watch" else False, "") for q in ACCESS]),
            "rbac mco-scheduler-extender",
            Verdict.FAIL,
            "may not watch nodeinterferencereports.mco.many-core.io, "
            "watch nodeinterferencereportshards.mco.many-core.io, watch nodes",
        ),
        (
            lambda v: replace(
                v,
                access=[(q, q.expected or (q.resource, q.identity) == ("secrets", "mco-analyzer"), "") for q in ACCESS],
            ),
            "rbac mco-analyzer",
            Verdict.WARN,
            "has more than it needs: may get secrets in mco-system",
        ),
        (
            lambda v: replace(
                v,
                access=[
                    (q, None, "SubjectAccessReview: HTTP 403 Forbidden") for q in ACCESS if q.identity == "mco-analyzer"
                ],
            ),
            "rbac mco-analyzer",
            Verdict.WARN,
            "cannot ask the authorizer: SubjectAccessReview: HTTP 403 Forbidden",
        ),
    ],
)
def test_each_broken_part_is_named(change: Any, name: str, verdict: Verdict, says: str) -> None:
    got = verdicts(judge_cluster(change(healthy()), ttl=TTL))
    assert got[name][0] is verdict, got[name]
    assert says in got[name][1], got[name]
    others = {n: v for n, (v, _) in got.items() if n != name and v is not Verdict.OK}
    assert not others, f"only {name} may change: {others}"


def test_an_unreachable_api_server_is_one_failure() -> None:
    view = ClusterView(now=NOW, crd=Read(error="API server unreachable: connection refused"), reachable=False)
    assert [(c.name, c.verdict) for c in judge_cluster(view, ttl=TTL)] == [("report CRD", Verdict.FAIL)]


@given(
    parts=st.lists(
        st.tuples(st.integers(0, 10**6), st.sampled_from(["ns", "us", "µs", "ms", "s", "m", "h"])),
        min_size=1,
        max_size=4,
    )
)
def test_go_durations(parts: list[tuple[int, str]]) -> None:
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    text = "".join(f"{n}{u}" for n, u in parts)
    assert go_duration_seconds(text) == pytest.approx(sum(n * units[u] for n, u in parts))


@pytest.mark.parametrize("bad", ["", "1", "1 s", "s", "1sec", "-1s", True, 1, None])
def test_not_go_durations(bad: object) -> None:
    assert go_duration_seconds(bad) is None


def test_doctor_cluster_without_an_api_server_says_so_quickly(tmp_path: Path) -> None:
    kubeconfig = unreachable_kubeconfig(tmp_path / "kubeconfig")
    run = subprocess.run(
        [sys.executable, "-m", "mco_py.cli", "doctor", "--cluster", "--kubeconfig", str(kubeconfig), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2, run.stderr
    doc = json.loads(run.stdout)
    assert [c["name"] for c in doc["checks"]] == ["report CRD"]
    assert "unreachable" in doc["checks"][0]["detail"]
    missing = subprocess.run(
        [sys.executable, "-m", "mco_py.cli", "doctor", "--cluster", "--kubeconfig", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert missing.returncode == 2
    assert "kubeconfig" in missing.stdout
    assert "does not exist" in missing.stdout


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
_shapes = st.sampled_from(["status", "spec", "items", "metadata", "data", "conditions", "nodes", "scheduling"])
_doc = st.none() | _json | st.dictionaries(_shapes, _json, max_size=4)


@given(
    crd=_doc,
    report=_doc,
    nodes=_doc,
    lease=_doc,
    volcano_conf=_doc,
    volcano_deployment=_doc,
    runtime_class=_doc,
    kube_scheduler_conf=_doc | st.builds(lambda text: {"data": {"config.yaml": text}}, st.text(max_size=40)),
)
def test_any_json_the_api_server_could_send_is_judged_not_a_crash(**docs: Any) -> None:
    view = ClusterView(now=NOW, **{name: Read(doc) for name, doc in docs.items()})
    for check in judge_cluster(view, ttl=TTL):
        assert check.verdict in Verdict


def test_control_plane_nodes_without_a_collector_are_not_missing() -> None:
    control = node("cp-1", **{"node-role.kubernetes.io/control-plane": ""})
    view = replace(healthy(), nodes=Read({"items": [node("n1"), node("n2", **KATA), control]}))
    got = verdicts(judge_cluster(view, ttl=TTL))
    assert got["nodes in the report"][0] is Verdict.OK


def test_a_guard_pods_install_is_judged_by_its_own_table() -> None:
    plain = {(a.verb, a.resource, a.namespace): a.expected for a in access_table(False) if a.identity == "mco-analyzer"}
    guard = {(a.verb, a.resource, a.namespace): a.expected for a in access_table(True) if a.identity == "mco-analyzer"}
    assert plain[GUARD_PODS_PROBE.verb, "pods", ""] is False
    assert plain["create", "events", "default"] is False
    assert guard["list", "pods", ""] is True
    assert guard["create", "events", "default"] is True
    assert guard["delete", "pods", "default"] is False
    assert (
        len([a for a in access_table(True) if (a.verb, a.resource, a.namespace) == ("create", "events", "default")])
        == 1
    )


def sharded(*, versions: list[int], shard_versions: dict[int, int], changes: dict[str, str | None]) -> ClusterView:
    """``healthy()`` with its two nodes in a sharded report of two shards: both in shard 0, where
    crc32 puts them (``shard_index``), shard 1 empty."""
    assert shard_index("n1", 2) == shard_index("n2", 2) == 0
    view = healthy()
    status = {**view.report.doc["status"], "nodes": []}
    status["shards"] = {"generation": 7, "count": 2, "versions": versions, "changes": changes}
    held = {0: {n: {"name": n, "level": "Low", "score": 5} for n in ("n1", "n2")}, 1: {}}
    shards = [
        {
            "spec": {"report": "cluster", "generation": 7, "index": k, "count": 2},
            "status": {"version": v, "nodes": held[k]},
        }
        for k, v in shard_versions.items()
    ]
    return replace(view, report=Read({"status": status}), shards=Read({"items": shards}))


def test_a_report_the_extender_cannot_read_is_named_with_its_bad_field() -> None:
    view = healthy()
    status = {**view.report.doc["status"], "nodes": [{"name": "n1", "level": "Low", "score": 101}]}
    got = verdicts(judge_cluster(replace(view, report=Read({"status": status})), ttl=TTL))
    assert got["report content"] == (
        Verdict.FAIL,
        "unreadable: status: Expected `float` <= 100.0 - at `nodes[0].score`; the extender cannot use it and "
        "schedules without it (basic mode)",
    )
    assert "nodes in the report" not in got


def test_a_sharded_report_is_read_from_its_shards_with_the_changes_laid_over() -> None:
    got = verdicts(
        judge_cluster(sharded(versions=[1, 1], shard_versions={0: 1, 1: 1}, changes={"n2": "High 80 io"}), ttl=TTL)
    )
    assert got["report shards"] == (Verdict.OK, "generation 7: all 2 shards present")
    assert got["nodes in the report"] == (Verdict.OK, "all 2 Nodes reported; High: n2")
    got = verdicts(judge_cluster(sharded(versions=[1, 2], shard_versions={0: 1, 1: 1}, changes={"n2": None}), ttl=TTL))
    assert got["report shards"][0] is Verdict.WARN
    assert got["report shards"][1].startswith("report generation 7 is incomplete: 1 of 2 shards missing")
    assert got["nodes in the report"][0] is Verdict.WARN  # n2 left the report
    assert "n2" in got["nodes in the report"][1]
    got = verdicts(judge_cluster(sharded(versions=[1, 1], shard_versions={1: 1}, changes={}), ttl=TTL))
    assert got["report shards"][1].startswith("report generation 7 is incomplete: 1 of 2 shards missing")
    assert got["nodes in the report"][0] is Verdict.WARN  # shard 0 missing: n1 and n2 have no entry
    got = verdicts(
        judge_cluster(sharded(versions=[1, 1], shard_versions={0: 1, 1: 1}, changes={"n2": "Loud 3"}), ttl=TTL)
    )
    assert got["report shards"] == (
        Verdict.FAIL,
        "generation 7: status.shards.changes[n2]: 'Loud 3': unknown level 'Loud'; "
        "expected one of ['None', 'Low', 'Medium', 'High', 'Unknown']",
    )
    view = sharded(versions=[1, 1], shard_versions={0: 1, 1: 1}, changes={})
    items = view.shards.doc["items"]  # type: ignore[index]
    items[0]["status"]["nodes"]["n1"]["score"] = "high"
    got = verdicts(judge_cluster(view, ttl=TTL))
    assert got["report shards"] == (
        Verdict.FAIL,
        "generation 7: NodeInterferenceReportShard : status.nodes[n1]: Expected `float`, got `str` - at `score`",
    )
    assert "nodes in the report" not in got  # its nodes are unknown: no collector is blamed
    view = replace(sharded(versions=[1, 1], shard_versions={}, changes={}), shards=Read(error="HTTP 403 Forbidden"))
    got = verdicts(judge_cluster(view, ttl=TTL))
    assert got["report shards"][0] is Verdict.FAIL
    assert "HTTP 403" in got["report shards"][1]


def test_an_install_in_another_namespace_is_asked_about_and_named_there() -> None:
    table = access_table(False, "platform-mco")
    namespaces = {a.namespace for a in table}
    assert "mco-system" not in namespaces
    assert {"platform-mco", "default", ""} <= namespaces
    assert ("mco-analyzer", "update", "leases.coordination.k8s.io/mco-analyzer", "platform-mco") in {
        (a.identity, a.verb, a.resource, a.namespace) for a in table
    }
    checks = verdicts(judge_cluster(replace(healthy(), namespace="platform-mco", lease=Read()), ttl=30))
    assert "no Lease platform-mco/mco-analyzer" in checks["analyzer leader"][1]


def test_doctor_takes_mcos_namespace_from_the_analyzers_file(tmp_path: Path) -> None:
    assert mco_namespace(tmp_path) == "mco-system"
    (tmp_path / "analyzer.yaml").write_text("mode: cluster\nnamespace: platform-mco\n")
    assert mco_namespace(tmp_path) == "platform-mco"
    (tmp_path / "analyzer.yaml").write_text("mode: [not, a, mode]\n")
    assert mco_namespace(tmp_path) == "mco-system"
