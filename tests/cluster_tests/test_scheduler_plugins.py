"""mco-plugin inside the real schedulers: MCO's builds of Volcano's vc-scheduler v1.14.1 and of
kube-scheduler v1.34.1 (scripts/build_schedulers.py) against the real control plane.

One cluster for the module: four fake nodes, Volcano's default plugins plus ``mco-plugin`` in
the ConfigMap's second tier, kube-scheduler with a profile ``mco-scheduler`` that enables the
plugin. The tests write the NodeInterferenceReport themselves (as the analyzer would) so each one
states exactly what the schedulers see; the analyzer's own writes are the extender tests' part.
"""

from __future__ import annotations

import json
import re
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from mco_py.kube.client import load_api_client
from mco_py.model import SIGNAL_NAMES, DimensionScore, Level, NodeAssessment, Report
from mco_py.report.builder import ReportBuilder
from mco_py.report.shards import ShardPlanner
from mco_py.store.kube import KubeReportStore
from scripts.build_schedulers import schedulers
from scripts.gobuild import BuildError
from tests.cluster.build import volcano_crds, volcano_installer
from tests.cluster.cluster import DEFAULT_VOLCANO_CONF, RealCluster
from tests.cluster_tests.conftest import ROOT, wait_until
from tests.docs.examples import check as check_example
from tests.docs.examples import make_schedulers_output

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

#: The plugins' report TTL here (seconds): fallback shows within a few seconds.
TTL = 15
KATA = "kata-qemu"
KATA_LABEL = "katacontainers.io/kata-runtime"
ARGS = {"crName": "cluster", "crStatusTTLSeconds": TTL, "hardConstraints": {"psiIoSomeAvg10Threshold": 20}}
#: Volcano's default configuration with mco-plugin last in its second tier.
VOLCANO_CONF = (
    DEFAULT_VOLCANO_CONF
    + "  - name: mco-plugin\n    arguments:\n"
    + textwrap.indent(yaml.safe_dump(ARGS, sort_keys=False), " " * 6)
)
KUBE_CONFIG = {
    "profiles": [
        {
            "schedulerName": "mco-scheduler",
            "plugins": {"multiPoint": {"enabled": [{"name": "mco-plugin", "weight": 1}]}},
            "pluginConfig": [{"name": "mco-plugin", "args": ARGS}],
        },
        {  # the same without the herd guard
            "schedulerName": "mco-noguard",
            "plugins": {"multiPoint": {"enabled": [{"name": "mco-plugin", "weight": 1}]}},
            "pluginConfig": [{"name": "mco-plugin", "args": {**ARGS, "herdGuard": None}}],
        },
    ]
}
SCHEDULERS = ["volcano", "mco-scheduler"]


@dataclass
class Env:
    cluster: RealCluster
    workdir: Path
    sequence: int = 0

    def kubectl(self, *args: str, **kw: Any) -> str:
        return self.cluster.kubectl(*args, **kw)

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json"))

    def report(self, nodes: list[dict[str, Any]], *, age: float = 0.0, status: dict[str, Any] | None = None) -> None:
        """Write the report (status), dated ``age`` seconds ago."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() - age)) + ".000Z"
        doc = status or {"lastUpdateTime": stamp, "analyzer": {"identity": "test", "rulesVersion": "1"}, "nodes": nodes}
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump({"apiVersion": "mco.many-core.io/v1alpha1",
                                                              "kind": "NodeInterferenceReport",
                                                              "metadata": {"name": "cluster"}}))  # fmt: skip
        self.kubectl("patch", "nir", "cluster", "--subresource=status", "--type=merge", "-p",
                     json.dumps({"status": doc}))  # fmt: skip

    def report_in_use(self, nodes: int, timeout: float = 60.0) -> None:
        """Wait until Volcano's mco-plugin scores by a report of ``nodes`` entries (out of basic
        mode). Its informer starts at the first session, here before the CRD exists, and retries
        the list with a backoff that a loaded machine stretches. (kube-scheduler's starts with the
        plugin, and its state is known only from its first scheduling cycle on.)"""
        scheduler = "volcano"

        def in_use() -> bool:
            metrics = self.metrics(scheduler)
            return (
                metrics.get(("mco_extender_basic_mode", ())) == 0
                and metrics.get(("mco_scheduler_plugin_report_nodes", ())) == nodes
            )

        wait_until(in_use, f"{scheduler}'s plugin to use the report's {nodes} nodes", timeout)

    def pods(
        self,
        prefix: str,
        count: int,
        scheduler: str,
        *,
        annotations: dict[str, str] | None = None,
        runtime_class: str | None = None,
        cpu: str = "10m",
        group: str | None = None,
    ) -> list[str]:
        """Create ``count`` pods for ``scheduler`` (a PodGroup member when ``group`` is given)."""
        names = [f"{prefix}-{i}" for i in range(count)]
        meta_annotations = {**(annotations or {}), **({"scheduling.k8s.io/group-name": group} if group else {})}
        docs = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "annotations": meta_annotations},
                "spec": {
                    "schedulerName": scheduler,
                    **({"runtimeClassName": runtime_class} if runtime_class else {}),
                    "containers": [
                        {"name": "c", "image": "registry.invalid/app:1", "resources": {"requests": {"cpu": cpu}}}
                    ],
                },
            }
            for name in names
        ]
        self.kubectl("create", "-f", "-", stdin=yaml.safe_dump_all(docs))
        return names

    def placements(self, names: list[str], timeout: float = 60.0) -> dict[str, str]:
        def bound() -> dict[str, str] | None:
            pods = {p["metadata"]["name"]: p for p in self.json("get", "pods", "-n", "default")["items"]}
            got = {n: pods[n]["spec"].get("nodeName", "") for n in names if n in pods}
            return got if len(got) == len(names) and all(got.values()) else None

        result: dict[str, str] = wait_until(bound, f"pods {names} to be bound", timeout)
        return result

    def unbound(self, names: list[str], seconds: float) -> None:
        """None of ``names`` is bound within ``seconds`` (several scheduling cycles)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            pods = self.json("get", "pods", "-n", "default")["items"]
            bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods if p["metadata"]["name"] in names}
            assert not any(bound.values()), f"bound while they must wait: {bound}"
            time.sleep(0.5)

    def delete_pods(self) -> None:
        self.kubectl("delete", "pods", "--all", "-n", "default", "--grace-period=0", "--force", "--wait=false")
        wait_until(lambda: not self.json("get", "pods", "-n", "default")["items"], "pods to go")

    def metrics(self, scheduler: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        port = self.cluster.volcano_metrics_port if scheduler == "volcano" else self.cluster.kube_scheduler_port
        url = f"http://127.0.0.1:{port}/metrics" if scheduler == "volcano" else f"https://127.0.0.1:{port}/metrics"
        import ssl

        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        with urllib.request.urlopen(url, timeout=10, context=context if url.startswith("https") else None) as resp:
            text = resp.read().decode()
        out = {}
        for family in text_string_to_metric_families(text):
            if family.name.startswith("mco_"):
                for sample in family.samples:
                    out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return out


def _decisions(env: Env, scheduler: str, verb: str, result: str, reason: str) -> float:
    key = ("mco_extender_decisions_total", (("reason", reason), ("result", result), ("verb", verb)))
    return env.metrics(scheduler).get(key, 0.0)


def entry(name: str, level: str, score: float, *, psi_io: float = 1.0, **dims: float) -> dict[str, Any]:
    """A report entry: its ``psiIoSomeAvg10`` signal and its dimensions' scores."""
    return {
        "name": name,
        "level": level,
        "score": score,
        **({"dimensions": {d: {"level": "None", "score": s} for d, s in dims.items()}} if dims else {}),
        "signals": {"psiIoSomeAvg10": psi_io},
        "reasons": [],
    }


#: node-1 quiet, node-2 over the io constraint, node-3 High (and the only Kata node), node-4 Low.
HOT = [
    entry("node-1", "None", 0),
    entry("node-2", "Medium", 55, psi_io=35),
    entry("node-3", "High", 90),
    entry("node-4", "Low", 30),
]


@pytest.fixture(scope="module")
def mco_schedulers() -> dict[str, Any]:
    try:
        return schedulers()
    except BuildError as exc:
        pytest.fail(f"cannot build MCO's schedulers: {exc}")


def test_make_schedulers_prints_what_the_docs_show(mco_schedulers: dict[str, Any]) -> None:
    """docs/scheduling.md's `make schedulers` output (built by the fixture: the script finds them cached)."""
    check_example("make-schedulers", make_schedulers_output())


@pytest.fixture(scope="module")
def env(
    cluster_binaries: dict[str, Path], mco_schedulers: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Env]:
    workdir = tmp_path_factory.mktemp("plugins")
    bins = {**cluster_binaries, **mco_schedulers["binaries"]}
    cluster = RealCluster(workdir / "cluster", bins, crds=volcano_crds(cluster_binaries))
    cluster.start(nodes=4, volcano=True, volcano_conf=VOLCANO_CONF, kube_scheduler=True, scheduler_config=KUBE_CONFIG)
    try:
        for crd in sorted((ROOT / "mco_py" / "data" / "crds").glob("*.yaml")):
            cluster.kubectl("apply", "-f", str(crd))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        cluster.kubectl("label", "node", "node-3", f"{KATA_LABEL}=true")
        cluster.apply([{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": KATA},
                        "handler": KATA}])  # fmt: skip
        yield Env(cluster, workdir)
    finally:
        cluster.stop()


@pytest.fixture(autouse=True)
def _clean(env: Env) -> Iterator[None]:
    yield
    env.delete_pods()
    env.kubectl("uncordon", "node-1", "node-2", "node-3", "node-4")


def _logs(env: Env) -> str:
    return "\n".join(f"--- {k}\n{v}" for k, v in env.cluster.logs().items() if "scheduler" in k)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_both_schedulers_filter_prefer_quiet_nodes_and_keep_kata_pods_on_kata_nodes(env: Env, scheduler: str) -> None:
    env.report(HOT)
    if scheduler == "volcano":
        env.report_in_use(len(HOT))
    first = env.placements(env.pods(f"{scheduler[:3]}-one", 1, scheduler))
    assert list(first.values()) == ["node-1"], (first, _logs(env))
    spread = env.placements(env.pods(f"{scheduler[:3]}-many", 8, scheduler))
    assert "node-2" not in spread.values(), spread
    # a Kata pod fits only the node labelled for Kata, busy as it is (its RuntimeClass has no nodeSelector)
    kata = env.placements(env.pods(f"{scheduler[:3]}-kata", 2, scheduler, runtime_class=KATA))
    assert set(kata.values()) == {"node-3"}, kata
    verb = "volcano_predicate" if scheduler == "volcano" else "kube_filter"
    score = "volcano_prioritize" if scheduler == "volcano" else "kube_prioritize"
    assert _decisions(env, scheduler, verb, "reject", "constraint") > 0
    assert _decisions(env, scheduler, verb, "reject", "kata") > 0
    assert _decisions(env, scheduler, score, "score", "report") > 0
    metrics = env.metrics(scheduler)
    assert metrics[("mco_extender_basic_mode", ())] == 0
    assert metrics[("mco_scheduler_plugin_report_nodes", ())] == 4


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_pod_sensitive_to_one_dimension_is_placed_by_it(env: Env, scheduler: str) -> None:
    """By node score node-4 is the best; by io alone node-1 is (node-3 a close second)."""
    env.report([
        entry("node-1", "Medium", 70, cpu=70),
        entry("node-2", "Medium", 55, psi_io=35),
        entry("node-3", "High", 90, memory=90, io=5),
        entry("node-4", "Low", 40, io=40, cpu=10),
    ])  # fmt: skip
    plain = env.placements(env.pods(f"{scheduler[:3]}-plain", 1, scheduler))
    assert list(plain.values()) == ["node-4"], plain
    io = env.placements(
        env.pods(f"{scheduler[:3]}-io", 1, scheduler, annotations={"mco.many-core.io/sensitive-to": "io"})
    )
    assert list(io.values()) == ["node-1"], io
    verb = "volcano_prioritize" if scheduler == "volcano" else "kube_prioritize"
    assert _decisions(env, scheduler, verb, "score", "dimensions") > 0


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_stale_missing_or_unreadable_report_falls_back_and_kata_still_holds(env: Env, scheduler: str) -> None:
    """node-2 alone left: a fresh report keeps the pod off it; a stale, missing or unreadable one lets
    it on; a Kata pod still never goes to a node without Kata."""
    env.kubectl("cordon", "node-1", "node-3", "node-4")
    env.report(HOT)
    (waiting,) = env.pods(f"{scheduler[:3]}-fresh", 1, scheduler)
    env.unbound([waiting], 4)
    env.report(HOT, age=TTL + 30)
    assert env.placements([waiting]) == {waiting: "node-2"}
    assert env.metrics(scheduler)[("mco_extender_fallback", (("reason", "stale"),))] == 1
    (kata,) = env.pods(f"{scheduler[:3]}-kata", 1, scheduler, runtime_class=KATA)
    env.unbound([kata], 4)
    # a report that cannot be read: a shard count that is no power of two
    env.kubectl("uncordon", "node-3")
    env.delete_pods()
    env.kubectl("cordon", "node-3")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    env.report([], status={"lastUpdateTime": stamp, "nodes": [],
                           "shards": {"generation": 1, "count": 3, "versions": [1, 1, 1], "changes": {}}})  # fmt: skip
    unreadable = env.pods(f"{scheduler[:3]}-unreadable", 1, scheduler)
    assert env.placements(unreadable) == {unreadable[0]: "node-2"}
    assert env.metrics(scheduler)[("mco_extender_fallback", (("reason", "unreadable"),))] == 1
    env.kubectl("delete", "nir", "cluster")
    missing = env.pods(f"{scheduler[:3]}-missing", 1, scheduler)
    assert env.placements(missing) == {missing[0]: "node-2"}
    assert env.metrics(scheduler)[("mco_extender_fallback", (("reason", "missing"),))] == 1


def test_volcanos_own_plugins_still_decide_and_a_report_change_frees_a_waiting_gang(env: Env) -> None:
    """gang (a PodGroup of 3), predicates (12 of a node's 16 CPUs each: one pod a node) and proportion
    (the default queue) with mco-plugin: with two of the four nodes over the constraint the gang
    cannot start and nothing is bound; once the report clears one of them, all three start, one a node."""
    hot = [entry("node-1", "None", 0), entry("node-2", "Medium", 55, psi_io=35), entry("node-3", "High", 90, psi_io=40),
           entry("node-4", "Low", 30)]  # fmt: skip
    env.report(hot)
    env.cluster.apply([{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                        "metadata": {"name": "gang", "namespace": "default"},
                        "spec": {"minMember": 3, "queue": "default"}}])  # fmt: skip
    names = env.pods("gang", 3, "volcano", cpu="12", group="gang")
    env.unbound(names, 6)
    events = env.kubectl("get", "events", "-n", "default", "--field-selector", "involvedObject.kind=PodGroup")
    assert "psiIoSomeAvg10" in events or "Unschedulable" in events, events
    hot[2] = entry("node-3", "High", 90, psi_io=1)
    env.report(hot)
    placed = env.placements(names, timeout=60)
    assert sorted(placed.values()) == ["node-1", "node-3", "node-4"], placed
    too_big = env.pods("big", 1, "volcano", cpu="20")  # predicates: no node has 20 CPUs
    env.unbound(too_big, 4)
    env.kubectl("delete", "podgroup", "gang", "-n", "default")


def test_binpack_still_packs_where_mco_finds_the_nodes_equal(env: Env) -> None:
    """Every node calm: mco-plugin gives each the same score, and Volcano's binpack (its weight raised
    so that it outweighs nodeorder's spreading) packs pods onto the node that already holds them."""
    packing = VOLCANO_CONF.replace(
        "  - name: binpack\n", "  - name: binpack\n    arguments:\n      binpack.weight: 10\n"
    )
    assert packing != VOLCANO_CONF
    env.cluster.set_volcano_conf(packing)
    try:
        env.report([entry(f"node-{i}", "None", 0) for i in range(1, 5)])
        time.sleep(2)  # vc-scheduler reloads its file
        placed = []
        for i in range(4):
            placed += env.placements(env.pods(f"pack-{i}", 1, "volcano", cpu="2")).values()
        assert len(set(placed)) == 1, placed
    finally:
        env.cluster.set_volcano_conf(VOLCANO_CONF)


def _node(name: str, level: Level, score: float, io: float, t: float, **dims: float) -> NodeAssessment:
    signals = dict.fromkeys(SIGNAL_NAMES[:5], 0.5) | {"psiIoSomeAvg10": io}
    dimensions = {d: DimensionScore(Level.NONE, s) for d, s in dims.items()}
    return NodeAssessment(name, level, score, signals, t, ("a reason long enough to take room " * 3,), "", dimensions)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_sharded_report_is_read_whole_and_its_changes_count(env: Env, scheduler: str) -> None:
    """The analyzer's own writer, with a small budget: the four nodes and 600 others in shards. The
    constraint read from node-2's shard holds; a level change laid over node-1's shard entry moves
    the next pod to node-4."""
    t = time.time()
    nodes = [_node("node-1", Level.NONE, 0, 1, t), _node("node-2", Level.MEDIUM, 55, 35, t),
             _node("node-3", Level.HIGH, 90, 1, t), _node("node-4", Level.LOW, 30, 1, t)]  # fmt: skip
    nodes += [_node(f"filler-{i:03d}", Level.LOW, 30, 1, t, cpu=30) for i in range(600)]
    budget = 40_000
    builder = ReportBuilder(budget, shards=ShardPlanner(budget, refresh_seconds=3600))
    store = KubeReportStore(load_api_client(env.cluster.admin_kubeconfig), name="cluster", request_timeout=30)
    try:
        built = builder.build(Report(t, "test", "1", tuple(sorted(nodes, key=lambda n: n.name))))
        assert built.shards is not None, "the report must be sharded for this test"
        store.publish(built)
        env.kubectl("cordon", "node-1", "node-3", "node-4")
        (waiting,) = env.pods(f"{scheduler[:3]}-shard", 1, scheduler)
        env.unbound([waiting], 4)
        env.delete_pods()
        env.kubectl("uncordon", "node-1", "node-3", "node-4")
        first = env.placements(env.pods(f"{scheduler[:3]}-q", 1, scheduler))
        assert list(first.values()) == ["node-1"], first
        t = time.time()
        nodes[0] = _node("node-1", Level.HIGH, 95, 1, t)
        built = builder.build(Report(t, "test", "1", tuple(sorted(nodes, key=lambda n: n.name))))
        assert built.shards is not None
        assert "node-1" in built.shards.index.changes, "node-1's change travels as a line of the report object"
        store.publish(built)
        time.sleep(1.5)  # the informer's watch; a Volcano session opens every second
        second = env.placements(env.pods(f"{scheduler[:3]}-r", 1, scheduler))
        assert list(second.values()) == ["node-4"], second
        assert env.metrics(scheduler)[("mco_scheduler_plugin_report_nodes", ())] == 604
    finally:
        env.kubectl("delete", "nirs", "-l", "mco.many-core.io/report=cluster", "--wait=false", check=False)
        env.kubectl("delete", "nir", "cluster", "--ignore-not-found")


def test_a_bad_argument_is_logged_and_its_default_used(env: Env) -> None:
    """A hot-reloaded ConfigMap with a wrong type: vc-scheduler logs it, keeps running and keeps the
    default constraint (psiIoSomeAvg10 20)."""
    bad = VOLCANO_CONF.replace("psiIoSomeAvg10Threshold: 20", "psiIoSomeAvg10Threshold: twenty")
    assert bad != VOLCANO_CONF
    env.cluster.set_volcano_conf(bad)
    try:
        env.report(HOT)
        env.kubectl("cordon", "node-1", "node-3", "node-4")
        (waiting,) = env.pods("badarg", 1, "volcano")
        wait_until(lambda: "hardConstraints.psiIoSomeAvg10Threshold" in (env.workdir / "cluster" / "vc-scheduler.log")
                   .read_text(errors="replace"), "the argument problem in vc-scheduler's log")  # fmt: skip
        env.unbound([waiting], 4)
        assert env.metrics("volcano")[("mco_scheduler_plugin_problems_total", (("kind", "argument"),))] > 0
        assert env.cluster.vc_scheduler.proc.poll() is None
    finally:
        env.cluster.set_volcano_conf(VOLCANO_CONF)


def test_the_plugin_needs_only_read_access_to_reports(env: Env, cluster_binaries: dict[str, Path]) -> None:
    """vc-scheduler with a ServiceAccount that has Volcano's own scheduler rights and MCO's plugin role:
    the report is read. Without MCO's role the plugin cannot list it: it says so, counts it, and
    scheduling goes on in basic mode."""
    installer = volcano_installer(cluster_binaries)
    docs = [d for d in yaml.safe_load_all(installer.read_text()) if d]
    volcano_role = next(d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "volcano-scheduler")
    plugin_role = _plugin_cluster_role()
    assert plugin_role["rules"] == [{"apiGroups": ["mco.many-core.io"],
                                     "resources": ["nodeinterferencereports", "nodeinterferencereportshards"],
                                     "verbs": ["get", "list", "watch"]}]  # fmt: skip
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "volcano-scheduler",
                                                                      "namespace": "volcano-system"}}  # fmt: skip

    def binding(role: str) -> dict[str, Any]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"test-{role}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "volcano-scheduler", "namespace": "volcano-system"}],
        }

    env.cluster.apply(
        [sa, volcano_role, plugin_role, binding("volcano-scheduler"), binding(plugin_role["metadata"]["name"])]
    )
    kubeconfig = env.cluster.service_account_kubeconfig(
        "volcano-system", "volcano-scheduler", env.workdir / "sa.kubeconfig"
    )
    try:
        env.cluster.start_vc_scheduler(kubeconfig=kubeconfig)
        env.report(HOT)
        env.kubectl("cordon", "node-1", "node-3", "node-4")
        (waiting,) = env.pods("rbac", 1, "volcano")
        env.unbound([waiting], 4)
        env.delete_pods()
        env.kubectl("delete", "clusterrolebinding", f"test-{plugin_role['metadata']['name']}")
        env.cluster.start_vc_scheduler(kubeconfig=kubeconfig)  # a fresh process: it cannot list the report
        (basic,) = env.pods("rbac-basic", 1, "volcano")
        assert env.placements([basic]) == {basic: "node-2"}
        log = (env.workdir / "cluster" / "vc-scheduler.log").read_text(errors="replace")
        assert re.search(r"mco-plugin: .*forbidden", log), log[-3000:]
        assert env.metrics("volcano")[("mco_scheduler_plugin_problems_total", (("kind", "watch"),))] > 0
    finally:
        env.cluster.start_vc_scheduler()


def _plugin_cluster_role() -> dict[str, Any]:
    """The ClusterRole the roles give the schedulers that run mco-plugin (its Jinja expressions blanked)."""
    for path in sorted((ROOT / "roles").glob("*/templates/*.yaml.j2")):
        raw = path.read_text()
        if "name: mco-scheduler-plugin" not in raw:
            continue
        for doc in yaml.safe_load_all(re.sub(r"\{\{[^}]*\}\}|\{%[^%]*%\}|\{#[^#]*#\}", "x", raw)):
            if isinstance(doc, dict) and doc.get("kind") == "ClusterRole":
                return doc
    raise AssertionError("no ClusterRole mco-scheduler-plugin in the roles' templates")


#: node-1 quiet, the other three Low by cpu: a burst's magnet.
QUIET_AND_LOW = [
    entry("node-1", "None", 0),
    entry("node-2", "Low", 20, cpu=20),
    entry("node-3", "Low", 20, cpu=20),
    entry("node-4", "Low", 20, cpu=20),
]
BURST = 24
STEERED = "mco_scheduler_plugin_herd_steered_total"


def _burst(env: Env, scheduler: str, prefix: str) -> dict[str, int]:
    """BURST pods created at once (one kubectl create); how many each node got."""
    placed = env.placements(env.pods(prefix, BURST, scheduler), timeout=120)
    counts = {f"node-{i}": 0 for i in range(1, 5)}
    for node in placed.values():
        counts[node] += 1
    return counts


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_the_herd_guard_spreads_a_burst_that_piles_without_it(env: Env, scheduler: str) -> None:
    """24 pods at once on a report of one quiet node and three Low ones: with the guard (the
    default) no node gets more than twice the mean and the pods steered away from node-1 get an
    Event and are counted; with herdGuard: null every pod lands on node-1."""
    env.report(QUIET_AND_LOW)
    if scheduler == "volcano":
        env.report_in_use(len(QUIET_AND_LOW))
    verb = "volcano_prioritize" if scheduler == "volcano" else "kube_prioritize"
    key = (STEERED, (("dimension", "cpu"), ("verb", verb)))
    before = env.metrics(scheduler).get(key, 0.0)
    guarded = _burst(env, scheduler, f"{scheduler[:3]}-herd")
    assert max(guarded.values()) <= 2 * BURST / 4, (guarded, _logs(env))
    assert guarded["node-1"] > 0, guarded
    steered = env.metrics(scheduler).get(key, 0.0) - before
    assert steered > 0, guarded
    events = env.json("get", "events", "-n", "default", "--field-selector", "reason=MCOHerdGuard")["items"]
    messages = [e.get("message") or e.get("note", "") for e in events]
    assert any("node node-1 (level None" in m and "cpu" in m for m in messages), messages
    env.delete_pods()

    if scheduler == "volcano":
        env.cluster.set_volcano_conf(VOLCANO_CONF + "      herdGuard: null\n")
        env.cluster.start_vc_scheduler(timeout=300)
        env.report(QUIET_AND_LOW)
        env.report_in_use(len(QUIET_AND_LOW))
        try:
            piled = _burst(env, "volcano", "vol-pile")
        finally:
            env.cluster.set_volcano_conf(VOLCANO_CONF)
            env.cluster.start_vc_scheduler(timeout=300)
    else:
        piled = _burst(env, "mco-noguard", "mco-pile")
    assert piled["node-1"] == BURST, piled
