"""Scheduling cost of the MCO extender with the real schedulers (prints figures; not part of `make test`).

Part 1, per cluster size (fake nodes, the real kube-apiserver/etcd of tests/cluster): the real
vc-scheduler and kube-scheduler each place PODS pods without an extender, with `mco extender`
(cluster mode, watching a NodeInterferenceReport that lists every node), for Volcano also with
`mco extender` registered for scores only (no predicate verb), and with the Go extender (the
same rules, decoding into k8s.io/api types): Volcano's own cost of calling an extender. Printed per run: pods
bound per second (first creation to last binding) and the p50/p99 time from a pod's creation to
its binding as a watch sees it, and the ratio with/without.

Part 2: requests per CPU-second of `mco extender` against a small Go extender written on
kube-scheduler's own types (bench/scheduling/goextender), both answering /kube/filter and
/kube/prioritize for the same bodies and report; server pinned to CPU 0, wrk on CPU 1.

Usage (after `make setup`; builds what it needs):
    .venv/bin/python bench/scheduling/run.py [--nodes 100,1000,5000] [--pods 100] [--duration 10]
        [--variants none,mco,mco-score-only,go] [--skip-schedulers] [--skip-extenders] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kubernetes import client, config, watch  # noqa: E402

from bench.extender.run import _listening_port, cpu_seconds, wrk  # noqa: E402
from mco_py.model import Level, NodeAssessment, Report  # noqa: E402
from mco_py.store.file import FileReportStore  # noqa: E402
from mco_py.store.kube import KubeReportStore  # noqa: E402
from tests.cluster.build import binaries, volcano_crds  # noqa: E402
from tests.cluster.cluster import RealCluster, extender_config, free_port, volcano_conf  # noqa: E402
from tests.extender import bodies  # noqa: E402

CRD = ROOT / "mco_py" / "data" / "crds" / "nodeinterferencereports.yaml"
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


def place(core: client.CoreV1Api, scheduler: str, pods: int, timeout: float = 600.0) -> dict[str, float]:
    """Create ``pods`` pods for ``scheduler`` one after another; time each from creation to binding."""
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
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
                if len(bound) >= pods:
                    w.stop()
                    break
        done.set()

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    for i in range(pods):
        name = f"{scheduler[:3]}-{i}"
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "schedulerName": scheduler,
                "containers": [
                    {"name": "c", "image": "registry.invalid/app:1", "resources": {"requests": {"cpu": "10m"}}}
                ],
            },
        }
        created[name] = time.monotonic()
        core.create_namespaced_pod(NAMESPACE, body)
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
    }


def stop_component(cluster: RealCluster, name: str) -> None:
    """Stop one of the cluster's programs (the others go on)."""
    for process in [p for p in cluster.processes if p.name == name]:
        process.stop()
        cluster.processes.remove(process)


VOLCANO_VARIANTS = ("none", "mco", "mco-score-only", "go")
KUBE_VARIANTS = ("none", "mco", "go")


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


def schedulers(nodes: int, pods: int, workdir: Path, variants: set[str]) -> list[dict[str, Any]]:
    """Each scheduler without an extender (``none``), with ``mco extender`` (``mco``; for Volcano also
    ``mco-score-only``: no predicate verb) and with the Go extender (``go``)."""
    bins = binaries()
    cluster = RealCluster(workdir / f"cluster-{nodes}", bins, crds=volcano_crds(bins))
    rows: list[dict[str, Any]] = []
    t0 = time.monotonic()
    cluster.start(nodes=nodes, timeout=600)
    print(f"{nodes} nodes: cluster up in {time.monotonic() - t0:.0f}s", flush=True)

    def record(scheduler: str, variant: str, result: dict[str, float], cpu: float) -> None:
        rows.append({"nodes": nodes, "scheduler": scheduler, "extender": variant, **result, "extender_cpu_s": cpu})
        print(rows[-1], flush=True)

    try:
        cluster.kubectl("apply", "-f", str(CRD))
        cluster.kubectl("wait", "--for=condition=Established", "crd/nodeinterferencereports.mco.many-core.io")
        cluster.kubectl("create", "namespace", NAMESPACE)
        api = config.new_client_from_config(str(cluster.admin_kubeconfig))
        KubeReportStore(api).write(report_for(nodes))
        core = client.CoreV1Api(api)
        with (
            extender_process(cluster.admin_kubeconfig, cluster.workdir) as (ext, url),
            go_extender_process(nodes, workdir) as go_url,
        ):
            cluster.start_volcano(None)
            for variant in (v for v in VOLCANO_VARIANTS if v in variants):
                if variant != "none":
                    target = go_url if variant == "go" else url
                    cluster.set_volcano_conf(volcano_conf(target, predicate=variant != "mco-score-only"))
                    time.sleep(3)  # vc-scheduler reloads its file
                cpu0 = sum(cpu_seconds(ext.pid))
                result = place(core, "volcano", pods)
                record("vc-scheduler", variant, result, sum(cpu_seconds(ext.pid)) - cpu0)
            stop_component(cluster, "vc-scheduler")
            for variant in (v for v in KUBE_VARIANTS if v in variants):
                target = go_url if variant == "go" else url
                cluster.start_kube_scheduler(extender_config(target) if variant != "none" else {})
                cpu0 = sum(cpu_seconds(ext.pid))
                result = place(core, "default-scheduler", pods)
                record("kube-scheduler", variant, result, sum(cpu_seconds(ext.pid)) - cpu0)
                stop_component(cluster, "kube-scheduler")
        api.close()
    finally:
        cluster.stop()
    return rows


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="100,1000,5000")
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--duration", type=int, default=10, help="seconds of wrk per body (part 2)")
    parser.add_argument(
        "--variants", default=",".join(VOLCANO_VARIANTS), help="of none, mco, mco-score-only (Volcano), go"
    )
    parser.add_argument("--skip-schedulers", action="store_true")
    parser.add_argument("--skip-extenders", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="mco-bench-scheduling-"))
    out: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count()}
    if not args.skip_schedulers:
        rows = []
        for n in (int(x) for x in args.nodes.split(",")):
            rows += schedulers(n, args.pods, workdir, set(args.variants.split(",")))
        out["schedulers"] = rows
        print("\nnodes  scheduler       extender        pods/s   p50 s   p99 s   p99 / none")
        for row in rows:
            base = next(
                (
                    r
                    for r in rows
                    if (r["nodes"], r["scheduler"], r["extender"]) == (row["nodes"], row["scheduler"], "none")
                ),
                None,
            )
            ratio = row["p99_s"] / base["p99_s"] if base and base["p99_s"] else float("nan")
            print(f"{row['nodes']:>5}  {row['scheduler']:<14}  {row['extender']:<14}  {row['pods_per_s']:>6.1f}  "
                  f"{row['p50_s']:>6.2f}  {row['p99_s']:>6.2f}  {ratio:.2f}")  # fmt: skip
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
