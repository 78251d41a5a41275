"""Scheduling cost of MCO with the real schedulers (prints figures; not part of `make test`).

Part 1, per cluster size (fake nodes, the real kube-apiserver/etcd of tests/cluster): the real
vc-scheduler and kube-scheduler each place PODS pods without MCO (`none`: the upstream builds),
with mco-plugin compiled in (`plugin`: MCO's builds of scripts/build_schedulers.py, the plugin
enabled, reading a NodeInterferenceReport that lists every node, sharded as the analyzer writes
it when it is large), with `mco extender` (`mco`, cluster mode, watching the same report), for
Volcano also with `mco extender` registered for scores only (`mco-score-only`), and with the Go
extender (`go`: the same rules, decoding into k8s.io/api types). Printed per run: pods bound per
second (first creation to last binding), the p50/p99 time from a pod's creation to its binding as
a watch sees it, the ratio with/without, and the scheduler's CPU seconds during the run and its
resident memory (VmRSS) after it.

Part 1b (--burst): the herd guard. BURST_PODS offline pods are submitted at once (8 client
threads) to BURST_NODES fake nodes of which BURST_QUIET are quiet and the rest Low (cpu 30); the
real vc-scheduler and kube-scheduler with mco-plugin place them with the guard on (`guard`, the
default arguments) and off (`no-guard`: herdGuard: null), in the same run, rounds alternating
the order. Printed per run: pods/s (first creation to last binding), the time taken to submit,
the most pods any node got, the mean, their ratio, and how many went to the quiet nodes.

Part 2: requests per CPU-second of `mco extender` against a small Go extender written on
kube-scheduler's own types (bench/scheduling/goextender), both answering /kube/filter and
/kube/prioritize for the same bodies and report; server pinned to CPU 0, wrk on CPU 1.

Usage (after `make setup`; builds what it needs):
    .venv/bin/python bench/scheduling/run.py [--nodes 100,1000,5000] [--pods 100] [--duration 10]
        [--variants none,plugin,mco,mco-score-only,go] [--rounds 3] [--skip-schedulers] [--skip-extenders]
        [--json FILE]
    .venv/bin/python bench/scheduling/run.py --burst [--rounds 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config, watch  # noqa: E402

from bench.extender.run import _listening_port, cpu_seconds, wrk  # noqa: E402
from mco_py.model import DimensionScore, Level, NodeAssessment, Report  # noqa: E402
from mco_py.report.builder import ReportBuilder  # noqa: E402
from mco_py.report.shards import ShardPlanner  # noqa: E402
from mco_py.report.size import DEFAULT_STATUS_BUDGET  # noqa: E402
from mco_py.store.file import FileReportStore  # noqa: E402
from mco_py.store.kube import KubeReportStore  # noqa: E402
from scripts.build_schedulers import schedulers as mco_schedulers  # noqa: E402
from tests.cluster.build import binaries, volcano_crds  # noqa: E402
from tests.cluster.cluster import (  # noqa: E402
    DEFAULT_VOLCANO_CONF,
    RealCluster,
    extender_config,
    free_port,
    volcano_conf,
)
from tests.extender import bodies  # noqa: E402

CRDS = ROOT / "mco_py" / "data" / "crds"
#: mco-plugin's arguments here: the report never goes stale during a run.
PLUGIN_ARGS = "    arguments: {crName: cluster, crStatusTTLSeconds: 3600}\n"
GO_EXTENDER = Path(__file__).with_name("goextender")
NAMESPACE = "bench"


def report_for(nodes: int) -> Report:
    """Every node calm but a few: a realistic report the extender reads for each decision."""
    items = []
    for i in range(1, nodes + 1):
        level = Level.HIGH if i % 50 == 0 else Level.NONE
        items.append(
            NodeAssessment(f"node-{i}", level, 90.0 if level is Level.HIGH else 2.0, {"psiIoSomeAvg10": float(i % 7)})
        )
    return Report(time.time(), "bench", "bench", tuple(items))


@contextmanager
def extender_process(kubeconfig: Path, workdir: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    cfg = workdir / "extender.yaml"
    cfg.write_text(
        json.dumps(
            {
                "mode": "cluster",
                "kubeconfig": str(kubeconfig),
                "listen": f"127.0.0.1:{port}",
                "crStatusTTLSeconds": 3600,
                "volcanoVersion": "1.10",
                "logLevel": "warning",
            }
        )
    )
    proc = subprocess.Popen([sys.executable, "-m", "mco_py.cli", "extender", "--config", str(cfg)], cwd=ROOT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    import urllib.request

    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as resp:
                if resp.status == 200:
                    break
        except OSError:
            time.sleep(0.2)
    try:
        yield proc, url
    finally:
        proc.terminate()
        proc.wait(30)


def place(
    core: client.CoreV1Api,
    scheduler: str,
    pods: int,
    timeout: float = 600.0,
    *,
    workers: int = 1,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Create ``pods`` pods for ``scheduler`` (one after another, or from ``workers`` threads at
    once); time each from creation to binding, and count the pods each node got."""
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    node_of: dict[str, str] = {}
    done = threading.Event()
    listed = core.list_namespaced_pod(NAMESPACE)

    def watcher() -> None:
        w = watch.Watch()
        for event in w.stream(
            core.list_namespaced_pod, NAMESPACE, resource_version=listed.metadata.resource_version, timeout_seconds=0
        ):
            pod = event["object"]
            name = pod.metadata.name
            if pod.spec.node_name and name not in bound:
                bound[name] = time.monotonic()
                node_of[name] = pod.spec.node_name
                if len(bound) >= pods:
                    w.stop()
                    break
        done.set()

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()

    def create(i: int) -> None:
        name = f"{scheduler[:3]}-{i}"
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels or {}},
            "spec": {
                "schedulerName": scheduler,
                "containers": [
                    {"name": "c", "image": "registry.invalid/app:1", "resources": {"requests": {"cpu": "10m"}}}
                ],
            },
        }
        created[name] = time.monotonic()
        core.create_namespaced_pod(NAMESPACE, body)

    if workers == 1:
        for i in range(pods):
            create(i)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(create, range(pods)))
    submitted = max(created.values()) - min(created.values())
    if not done.wait(timeout):
        raise SystemExit(f"{scheduler}: only {len(bound)} of {pods} pods bound in {timeout:.0f}s")
    latencies = sorted(bound[n] - created[n] for n in created)
    span = max(bound.values()) - min(created.values())
    core.delete_collection_namespaced_pod(NAMESPACE, grace_period_seconds=0)
    deadline = time.monotonic() + 120
    while core.list_namespaced_pod(NAMESPACE).items and time.monotonic() < deadline:
        time.sleep(0.5)
    return {
        "pods_per_s": pods / span,
        "p50_s": latencies[len(latencies) // 2],
        "p99_s": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "submit_s": submitted,
        "per_node": dict(Counter(node_of.values())),
    }


def stop_component(cluster: RealCluster, name: str) -> None:
    """Stop one of the cluster's programs (the others go on)."""
    for process in [p for p in cluster.processes if p.name == name]:
        process.stop()
        cluster.processes.remove(process)


VOLCANO_VARIANTS = ("none", "plugin", "mco", "mco-score-only", "go")
KUBE_VARIANTS = ("none", "plugin", "mco", "go")
#: kube-scheduler's default profile with mco-plugin enabled (weight 1, as docs/scheduling.md shows).
KUBE_PLUGIN_CONFIG = {
    "profiles": [
        {
            "schedulerName": "default-scheduler",
            "plugins": {"multiPoint": {"enabled": [{"name": "mco-plugin", "weight": 1}]}},
            "pluginConfig": [{"name": "mco-plugin", "args": {"crName": "cluster", "crStatusTTLSeconds": 3600}}],
        }
    ]
}


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` now, MiB (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def scheduler_process(cluster: RealCluster, name: str) -> subprocess.Popen[bytes]:
    return next(p.proc for p in cluster.processes if p.name == name)


@contextmanager
def go_extender_process(nodes: int, workdir: Path) -> Iterator[str]:
    """The Go extender (bench/scheduling/goextender) on a report file equal to the CR's."""
    report = workdir / f"report-{nodes}.json"
    FileReportStore(report).write(report_for(nodes))
    port = free_port()
    proc = subprocess.Popen(
        [str(build_go_extender(workdir)), "--listen", f"127.0.0.1:{port}", "--report", str(report)],
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while _listening_port(proc.pid) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


def volcano_variant(variant: str, url: str, go_url: str) -> str:
    """vc-scheduler's configuration for ``variant``."""
    if variant == "plugin":
        return DEFAULT_VOLCANO_CONF + "  - name: mco-plugin\n" + PLUGIN_ARGS
    if variant == "none":
        return DEFAULT_VOLCANO_CONF
    return volcano_conf(go_url if variant == "go" else url, predicate=variant != "mco-score-only")


def schedulers(nodes: int, pods: int, workdir: Path, variants: set[str], rounds: int = 1) -> list[dict[str, Any]]:
    """Each scheduler without MCO (``none``), with mco-plugin (``plugin``), with ``mco extender``
    (``mco``; for Volcano also ``mco-score-only``: no predicate verb) and with the Go extender (``go``).
    ``rounds`` runs them all that many times, in turn, each round in the other order: the cluster
    keeps the Events of every pod placed, and a variant run later would otherwise pay for them."""
    bins = binaries()
    mco_bins = mco_schedulers()["binaries"]
    cluster = RealCluster(workdir / f"cluster-{nodes}", bins, crds=volcano_crds(bins))
    rows: list[dict[str, Any]] = []
    current = 0
    t0 = time.monotonic()
    cluster.start(nodes=nodes, timeout=600)
    print(f"{nodes} nodes: cluster up in {time.monotonic() - t0:.0f}s", flush=True)

    def record(scheduler: str, variant: str, result: dict[str, float], extender_cpu: float, proc: Any) -> None:
        rows.append({"nodes": nodes, "scheduler": scheduler, "extender": variant, "round": current, **result,
                     "extender_cpu_s": extender_cpu, "scheduler_rss_mib": rss_mib(proc.pid)})  # fmt: skip
        print(rows[-1], flush=True)

    def run(scheduler: str, variant: str, pod_scheduler: str, ext_pid: int) -> None:
        proc = scheduler_process(cluster, scheduler)
        time.sleep(5)  # a started scheduler lists everything first; the plugin's informers too
        cpu0, ext0 = sum(cpu_seconds(proc.pid)), sum(cpu_seconds(ext_pid))
        result = place(core, pod_scheduler, pods)
        result["scheduler_cpu_s"] = sum(cpu_seconds(proc.pid)) - cpu0
        record(scheduler, variant, result, sum(cpu_seconds(ext_pid)) - ext0, proc)

    try:
        for crd in sorted(CRDS.glob("*.yaml")):
            cluster.kubectl("apply", "-f", str(crd))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        cluster.kubectl("create", "namespace", NAMESPACE)
        api = config.new_client_from_config(str(cluster.admin_kubeconfig))
        built = ReportBuilder(DEFAULT_STATUS_BUDGET, shards=ShardPlanner(DEFAULT_STATUS_BUDGET)).build(
            report_for(nodes)
        )
        KubeReportStore(api, request_timeout=60).publish(built)
        core = client.CoreV1Api(api)
        with (
            extender_process(cluster.admin_kubeconfig, cluster.workdir) as (ext, url),
            go_extender_process(nodes, workdir) as go_url,
        ):
            cluster.start_volcano(None)
            for current in range(rounds):
                order = [v for v in VOLCANO_VARIANTS if v in variants]
                for variant in order if current % 2 == 0 else order[::-1]:
                    cluster.bins = {**bins, **(mco_bins if variant == "plugin" else {})}
                    cluster.set_volcano_conf(volcano_variant(variant, url, go_url))
                    cluster.start_vc_scheduler(timeout=600)  # a fresh process each: CPU and memory its own
                    run("vc-scheduler", variant, "volcano", ext.pid)
            cluster.stop_vc_scheduler()
            for current in range(rounds):
                order = [v for v in KUBE_VARIANTS if v in variants]
                for variant in order if current % 2 == 0 else order[::-1]:
                    cluster.bins = {**bins, **(mco_bins if variant == "plugin" else {})}
                    target = go_url if variant == "go" else url
                    if variant == "plugin":
                        cluster.start_kube_scheduler(KUBE_PLUGIN_CONFIG)
                    else:
                        cluster.start_kube_scheduler(extender_config(target) if variant != "none" else {})
                    run("kube-scheduler", variant, "default-scheduler", ext.pid)
                    stop_component(cluster, "kube-scheduler")
        api.close()
    finally:
        cluster.stop()
    return rows


BURST_NODES = 100
BURST_QUIET = 10
BURST_PODS = 1000
#: The offline class label (mco_py.analysis.workloads.CLASS_LABEL).
OFFLINE = {"mco.many-core.io/workload-class": "offline"}
BURST_VARIANTS = {"guard": {}, "no-guard": {"herdGuard": None}}


def burst_report(nodes: int, quiet: int) -> Report:
    """``quiet`` nodes at level None (score 2), the rest Low (cpu 30), all sampled now."""
    now = time.time()
    items = []
    for i in range(1, nodes + 1):
        if i <= quiet:
            items.append(NodeAssessment(f"node-{i}", Level.NONE, 2.0, {"psiCpuSomeAvg10": 1.0}, last_sample_time=now))
        else:
            items.append(
                NodeAssessment(
                    f"node-{i}", Level.LOW, 30.0, {"psiCpuSomeAvg10": 12.0}, last_sample_time=now,
                    dominant="cpu", dimensions={"cpu": DimensionScore(Level.LOW, 30.0)},
                )
            )  # fmt: skip
    return Report(now, "bench", "bench", tuple(items))


def burst(pods: int, workdir: Path, rounds: int) -> list[dict[str, Any]]:
    """Both schedulers with mco-plugin, the herd guard on and off: where a burst of offline pods lands."""
    upstream = binaries()
    bins = {**upstream, **mco_schedulers()["binaries"]}
    cluster = RealCluster(workdir / "cluster-burst", bins, crds=volcano_crds(upstream))
    quiet = {f"node-{i}" for i in range(1, BURST_QUIET + 1)}
    rows: list[dict[str, Any]] = []
    cluster.start(nodes=BURST_NODES, timeout=600)
    try:
        for crd in sorted(CRDS.glob("*.yaml")):
            cluster.kubectl("apply", "-f", str(crd))
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        cluster.kubectl("create", "namespace", NAMESPACE)
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(cluster.admin_kubeconfig), client_configuration=cfg)
        cfg.connection_pool_maxsize = 16
        api = client.ApiClient(cfg)
        KubeReportStore(api, request_timeout=60).publish(
            ReportBuilder(DEFAULT_STATUS_BUDGET).build(burst_report(BURST_NODES, BURST_QUIET))
        )
        core = client.CoreV1Api(api)
        cluster.start_volcano(None)
        for scheduler in ("vc-scheduler", "kube-scheduler"):
            for current in range(rounds):
                order = list(BURST_VARIANTS)
                for variant in order if current % 2 == 0 else order[::-1]:
                    plugin_args = {"crName": "cluster", "crStatusTTLSeconds": 3600, **BURST_VARIANTS[variant]}
                    if scheduler == "vc-scheduler":
                        entry = "  - name: mco-plugin\n    arguments: " + json.dumps(plugin_args) + "\n"
                        cluster.set_volcano_conf(DEFAULT_VOLCANO_CONF + entry)
                        cluster.start_vc_scheduler(timeout=600)
                        pod_scheduler = "volcano"
                    else:
                        profile = json.loads(json.dumps(KUBE_PLUGIN_CONFIG))
                        profile["profiles"][0]["pluginConfig"][0]["args"] = plugin_args
                        cluster.start_kube_scheduler(profile)
                        pod_scheduler = "default-scheduler"
                    time.sleep(5)  # a started scheduler lists everything first; the plugin's informers too
                    result = place(core, pod_scheduler, pods, workers=8, labels=OFFLINE)
                    counts = [result["per_node"].get(f"node-{i}", 0) for i in range(1, BURST_NODES + 1)]
                    mean = pods / BURST_NODES
                    row = {
                        "scheduler": scheduler, "variant": variant, "round": current,
                        "pods_per_s": result["pods_per_s"], "submit_s": result["submit_s"],
                        "max": max(counts), "mean": mean, "max_over_mean": max(counts) / mean,
                        "on_quiet": sum(result["per_node"].get(n, 0) for n in quiet),
                        "nodes_used": sum(1 for c in counts if c), "p99_s": result["p99_s"],
                    }  # fmt: skip
                    rows.append(row)
                    print(row, flush=True)
                    if scheduler == "vc-scheduler":
                        cluster.stop_vc_scheduler()
                    else:
                        stop_component(cluster, "kube-scheduler")
        api.close()
    finally:
        cluster.stop()
    return rows


def burst_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (scheduler, variant): medians over the rounds, the worst max/mean, pods/s vs no-guard."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["scheduler"], row["variant"]), []).append(row)
    out = []
    for (scheduler, variant), group in groups.items():
        keys = ("pods_per_s", "submit_s", "max", "on_quiet", "nodes_used")
        med = {k: statistics.median(r[k] for r in group) for k in keys}
        out.append({"scheduler": scheduler, "variant": variant, "rounds": len(group), **med,
                    "worst_max_over_mean": max(r["max_over_mean"] for r in group),
                    "pods_per_s_min": min(r["pods_per_s"] for r in group),
                    "pods_per_s_max": max(r["pods_per_s"] for r in group)})  # fmt: skip
    for row in out:
        base = next((b for b in out if b["scheduler"] == row["scheduler"] and b["variant"] == "no-guard"), None)
        row["rate_ratio"] = row["pods_per_s"] / base["pods_per_s"] if base else float("nan")
    return out


def print_burst(summary_rows: list[dict[str, Any]], rounds: int) -> None:
    print(f"\n{BURST_PODS} offline pods, {BURST_NODES} nodes ({BURST_QUIET} quiet); medians of {rounds} round(s)")
    print("scheduler       variant   pods/s       / no-guard  submit s  max/node  max/mean (worst)  on quiet  used")
    for r in summary_rows:
        print(f"{r['scheduler']:<14}  {r['variant']:<8}  {r['pods_per_s']:>5.1f} [{r['pods_per_s_min']:.0f}-"
              f"{r['pods_per_s_max']:.0f}]  {r['rate_ratio']:>9.2f}  {r['submit_s']:>8.1f}  {r['max']:>8.0f}  "
              f"{r['worst_max_over_mean']:>16.1f}  {r['on_quiet']:>8.0f}  {r['nodes_used']:>4.0f}")  # fmt: skip


def build_go_extender(out: Path) -> Path:
    binary = out / "goextender"
    if not binary.exists():
        subprocess.run(["go", "build", "-trimpath", "-o", str(binary), "."], cwd=GO_EXTENDER, check=True)
    return binary


def extenders(duration: int, workdir: Path) -> list[dict[str, Any]]:
    """mco extender vs the Go extender: requests/s and per CPU-second for the same kube bodies."""
    report = workdir / "report.json"
    FileReportStore(report).write(report_for(1000))
    cfg = workdir / "extender-standalone.yaml"
    cfg.write_text(json.dumps({"mode": "standalone", "reportFile": str(report), "crStatusTTLSeconds": 36000}))
    go = build_go_extender(workdir)
    node_list = [bodies.node(f"node-{i}") for i in range(1, 101)]
    files = {
        "filter, 100 Nodes": ("/kube/filter", bodies.kube_args(node_list, None)),
        "prioritize, 100 Nodes": ("/kube/prioritize", bodies.kube_args(node_list, None)),
        "filter, 1000 NodeNames": ("/kube/filter", bodies.kube_args(None, [f"node-{i}" for i in range(1, 1001)])),
    }
    paths = {}
    for name, (route, doc) in files.items():
        path = workdir / f"{name.replace(' ', '_').replace(',', '')}.json"
        path.write_bytes(bodies.dumps(doc))
        paths[name] = (route, path)
    rows = []
    servers = {
        "mco extender (Python)": [
            "taskset", "-c", "0", sys.executable, "-m", "mco_py.cli", "extender", "--config", str(cfg),
            "--listen", "127.0.0.1:0", "--log-level", "warning",
        ],
        "Go extender (extender/v1 types)": [
            "taskset", "-c", "0", str(go), "--listen", f"127.0.0.1:{free_port()}", "--report", str(report),
        ],
    }  # fmt: skip
    for label, cmd in servers.items():
        proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            port_found = None
            while time.monotonic() < deadline and not port_found:
                port_found = _listening_port(proc.pid)
                time.sleep(0.05)
            assert port_found, f"{label} did not start"
            for name, (route, path) in paths.items():
                wrk(port_found, path, route, 2, pid=proc.pid)  # warm-up
                user0, sys0 = cpu_seconds(proc.pid)
                started = time.monotonic()
                rps, _, p99 = wrk(port_found, path, route, duration, pid=proc.pid)
                wall = time.monotonic() - started
                user1, sys1 = cpu_seconds(proc.pid)
                cpu = (user1 + sys1) - (user0 + sys0)
                requests = rps * wall
                rows.append({"server": label, "body": name, "req_per_s": rps, "p99_ms": p99,
                             "req_per_cpu_s": requests / max(cpu, 1e-9), "bytes": path.stat().st_size})  # fmt: skip
                print(rows[-1], flush=True)
        finally:
            proc.terminate()
            proc.wait(30)
    return rows


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (nodes, scheduler, variant): the median of each figure over the rounds, the spread of
    p99 and pods/s, and the ratios of the medians to ``none``'s."""
    groups: dict[tuple[int, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["nodes"], row["scheduler"], row["extender"]), []).append(row)
    out = []
    for (nodes, scheduler, variant), group in groups.items():
        med = {k: statistics.median(r[k] for r in group) for k in ("pods_per_s", "p50_s", "p99_s", "scheduler_cpu_s")}
        out.append({"nodes": nodes, "scheduler": scheduler, "variant": variant, "rounds": len(group), **med,
                    "scheduler_rss_mib": max(r["scheduler_rss_mib"] for r in group),
                    "p99_s_min": min(r["p99_s"] for r in group), "p99_s_max": max(r["p99_s"] for r in group),
                    "pods_per_s_min": min(r["pods_per_s"] for r in group),
                    "pods_per_s_max": max(r["pods_per_s"] for r in group)})  # fmt: skip
    for row in out:
        key = (row["nodes"], row["scheduler"], "none")
        base = next((b for b in out if (b["nodes"], b["scheduler"], b["variant"]) == key), None)
        row["p99_ratio"] = row["p99_s"] / base["p99_s"] if base and base["p99_s"] else float("nan")
        row["rate_ratio"] = row["pods_per_s"] / base["pods_per_s"] if base and base["pods_per_s"] else float("nan")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="100,1000,5000")
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--duration", type=int, default=10, help="seconds of wrk per body (part 2)")
    parser.add_argument(
        "--variants", default=",".join(VOLCANO_VARIANTS), help="of none, plugin, mco, mco-score-only (Volcano), go"
    )
    parser.add_argument("--rounds", type=int, default=3, help="runs of every variant, alternating the order")
    parser.add_argument("--skip-schedulers", action="store_true")
    parser.add_argument("--skip-extenders", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--burst", action="store_true", help="only part 1b: the herd guard under a burst")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="mco-bench-scheduling-"))
    out: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count()}
    if args.burst:
        out["burst"] = burst(BURST_PODS, workdir, args.rounds)
        out["burst_summary"] = burst_summary(out["burst"])
        print_burst(out["burst_summary"], args.rounds)
        if args.json:
            args.json.write_text(json.dumps(out, indent=2))
        return 0
    if not args.skip_schedulers:
        rows = []
        for n in (int(x) for x in args.nodes.split(",")):
            rows += schedulers(n, args.pods, workdir, set(args.variants.split(",")), args.rounds)
        out["schedulers"] = rows
        out["summary"] = summary(rows)
        print(f"\nmedians over {args.rounds} round(s), alternating the order; [min-max] of p99 and pods/s")
        print("nodes  scheduler       variant         pods/s          p50 s   p99 s             p99 / none", end="")
        print("  pods/s / none  CPU s  RSS MiB")
        for row in out["summary"]:
            print(f"{row['nodes']:>5}  {row['scheduler']:<14}  {row['variant']:<14}  {row['pods_per_s']:>6.1f} "
                  f"[{row['pods_per_s_min']:.0f}-{row['pods_per_s_max']:.0f}]  {row['p50_s']:>6.3f}  "
                  f"{row['p99_s']:>6.3f} [{row['p99_s_min']:.3f}-{row['p99_s_max']:.3f}]  {row['p99_ratio']:>10.2f}  "
                  f"{row['rate_ratio']:>13.2f}  {row['scheduler_cpu_s']:>5.2f}  "
                  f"{row['scheduler_rss_mib']:>7.0f}")  # fmt: skip
    if not args.skip_extenders:
        out["extenders"] = extenders(args.duration, workdir)
        print("\nserver                            body                     req/s   req per CPU-s   p99 ms")
        for row in out["extenders"]:
            print(f"{row['server']:<32}  {row['body']:<22}  {row['req_per_s']:>7.0f}  {row['req_per_cpu_s']:>13.0f}  "
                  f"{row['p99_ms']:>6.2f}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
