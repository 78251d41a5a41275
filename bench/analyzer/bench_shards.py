"""Sharded report benchmark: 10,000 and 65,000 nodes, every node re-assessed each 5 s interval (new
values), 5 % of them changing level.

Run: .venv/bin/python -m bench.analyzer.bench_shards [--nodes 10000 65000] [--intervals 24]
     [--kubeconfig FILE]   (also write through a real API server: python -m tests.cluster --kubeconfig FILE)
Prints figures; record them in docs/benchmarks.md ("Sharded report"). Not part of `make test`.

Per interval it measures, on one core:
- **build**: the analyzer's report build (ReportBuilder with the production shard planner: entry
  cache, size policy, membership, what to write);
- **serialize**: the request bodies the store sends (JSON patches and the report object), encoded
  with ``json.dumps`` as the kubernetes client does;
- **bytes per minute**: those bodies over 12 intervals (60 s), after the first generation;
- **reader**: the extender's side in a separate process: every shard object decoded as its watch
  delivers it, then assembled (:class:`ShardAssembler`); its RSS with every node held, and the
  time to apply one interval's shard events.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import random
import resource
import time
from pathlib import Path
from queue import Empty
from typing import Any

import msgspec
import psutil

from mco_py.model import SIGNAL_NAMES, DimensionScore, Level, NodeAssessment, Report
from mco_py.report.assemble import ShardAssembler, index_of, shard_of
from mco_py.report.builder import ReportBuilder
from mco_py.report.document import ShardStatus, Status, decode, report_of, to_builtins
from mco_py.report.shards import SHARD_LIMIT, ShardPlanner
from mco_py.report.size import DEFAULT_STATUS_BUDGET
from mco_py.store.kube import shard_patch, status_body

INTERVAL = 5.0
LEVELS = (Level.NONE, Level.LOW, Level.MEDIUM, Level.HIGH)


def assessment(i: int, level: Level, t: float, rng: random.Random) -> NodeAssessment:
    """A loaded node: every signal measured, one dimension, two reasons (full detail)."""
    signals = {name: round(rng.uniform(0, 30), 4) for name in SIGNAL_NAMES}
    signals["llcMissRate"] = round(rng.uniform(0, 0.2), 4)
    score = float(rng.randint(0, 99))
    return NodeAssessment(
        f"worker-{i:05d}.pool-{i % 17}.example.internal",
        level,
        score,
        signals,
        t,
        (f"io: psiIoSomeAvg10 {signals['psiIoSomeAvg10']} above 10", "cpu: psiCpuSomeRate steady"),
        "io",
        {"io": DimensionScore(level, score)},
    )


def request_bodies(built: Any, report_name: str = "cluster") -> list[bytes]:
    """What the store sends for ``built``: one JSON patch per shard written, then the report object."""
    plan = built.shards
    out = [shard_patch(w) for w in plan.writes] if plan is not None else []
    out.append(status_body(report_name, built.status, "1"))
    return out


def writer(nodes: int, intervals: int, seed: int = 1) -> dict[str, Any]:
    rng = random.Random(seed)
    t = 1_700_000_000.0
    levels = {i: LEVELS[i % 4] for i in range(nodes)}
    items = [assessment(i, levels[i], t, rng) for i in range(nodes)]
    builder = ReportBuilder(DEFAULT_STATUS_BUDGET, shards=ShardPlanner(DEFAULT_STATUS_BUDGET))
    cpu = time.process_time()
    first = builder.build(Report(t, "bench", "v1", tuple(items)))
    build_first = time.process_time() - cpu
    cpu = time.process_time()
    first_bodies = request_bodies(first)
    serialize_first = time.process_time() - cpu
    objects = shard_objects(first)
    builds, serializes, sent = [], [], []
    changed_rounds: list[Any] = []
    for _ in range(intervals):
        t += INTERVAL
        for i in rng.sample(range(nodes), nodes // 20):
            levels[i] = LEVELS[(LEVELS.index(levels[i]) + rng.randint(1, 3)) % 4]
        items = [assessment(i, levels[i], t, rng) for i in range(nodes)]  # every node re-assessed
        gc.disable()  # as Engine.build_report: the build's containers form no cycles
        cpu = time.process_time()
        built = builder.build(Report(t, "bench", "v1", tuple(items)))
        builds.append(time.process_time() - cpu)
        gc.enable()
        cpu = time.process_time()
        bodies = request_bodies(built)
        serializes.append(time.process_time() - cpu)
        sent.append(sum(len(b) for b in bodies))
        changed_rounds.append(built)
    plan = first.shards
    return {
        "nodes": nodes,
        "shards": plan.index.count if plan else 0,
        "largest_shard": max(plan.sizes) if plan else 0,
        "first_build_ms": build_first * 1000,
        "first_serialize_ms": serialize_first * 1000,
        "first_bytes": sum(len(b) for b in first_bodies),
        "build_ms": sorted(builds)[len(builds) // 2] * 1000,
        "serialize_ms": sorted(serializes)[len(serializes) // 2] * 1000,
        "bytes_per_minute": sum(sent[-12:]) * (12 / len(sent[-12:])),
        "objects": objects,
        "rounds": changed_rounds,  # the reader applies them all (each shard must reach its version)
    }


def shard_objects(built: Any) -> list[bytes]:
    """The report object and each shard object as a watch delivers them (JSON bytes)."""
    plan = built.shards
    out = [status_body("cluster", built.status, "1")]
    for w in plan.writes:
        spec = {"report": "cluster", "generation": plan.index.generation, "index": w.index, "count": plan.index.count}
        out.append(
            json.dumps(
                {
                    "metadata": {"name": f"cluster-{w.index}"},
                    "spec": spec,
                    "status": to_builtins(ShardStatus(w.version, w.nodes)),
                }
            ).encode()
        )
    return out


def reader(path: str, queue: Any) -> None:
    """The extender's side, in a fresh process: decode each shard, assemble; RSS; then apply rounds."""
    import pickle

    process = psutil.Process()
    base = process.memory_info().rss  # the interpreter and imports only
    with open(path, "rb") as fh:
        objects, rounds = pickle.load(fh)
    inputs = process.memory_info().rss - base
    cpu = time.process_time()
    head = json.loads(objects[0])["status"]
    shards = {}
    for raw in objects[1:]:
        obj = msgspec.json.decode(raw)
        shards[obj["metadata"]["name"]] = shard_of(obj)  # the reflector keeps only this
    asm = ShardAssembler()
    asm.set_shards(dict(shards))
    doc = decode(head, Status, "status")
    asm.set_head(report_of(doc), index_of(doc))  # type: ignore[arg-type]
    served = asm.report()
    load = time.process_time() - cpu
    assert served is not None
    nodes = len(served[1])
    rss = process.memory_info().rss - inputs  # the bench's inputs are not the reader's
    # one interval: each changed shard arrives as its own watch event (the patched object, whole)
    current = {
        name: json.loads(raw)
        for name, raw in zip([json.loads(r)["metadata"]["name"] for r in objects[1:]], objects[1:], strict=True)
    }
    applies = []
    for built in rounds:
        events = []
        for w in built.shards.writes:
            obj = current[f"cluster-{w.index}"]
            obj["status"] = to_builtins(ShardStatus(w.version, w.nodes))
            events.append(json.dumps(obj).encode())
        head_event = status_body("cluster", built.status, "1")
        cpu = time.process_time()
        for raw in events:
            obj = msgspec.json.decode(raw)  # as KubeListWatch decodes each watch event
            shards[obj["metadata"]["name"]] = shard_of(obj)
            asm.set_shards(dict(shards))
        obj = msgspec.json.decode(head_event)  # the report object's event
        doc = decode(obj["status"], Status, "status")
        asm.set_head(report_of(doc), index_of(doc))  # type: ignore[arg-type]
        assert asm.report() is not None, asm.problem
        assert not asm.problem, asm.problem
        applies.append((time.process_time() - cpu, len(events)))
    applies = applies[-12:]  # the last minute's
    per_interval = sorted(a for a, _ in applies)[len(applies) // 2]
    events = sorted(n for _, n in applies)[len(applies) // 2]
    queue.put({
        "reader_nodes": nodes,
        "reader_load_s": load,
        "reader_rss_mb": rss / 2**20,
        "reader_base_mb": base / 2**20,
        "reader_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "reader_interval_ms": per_interval * 1000,
        "reader_events": events,
    })  # fmt: skip


def against_api(kubeconfig: str, nodes: int, intervals: int, seed: int = 2) -> None:
    """Publish through a real API server (on this machine): the first generation, then ``intervals``
    rounds of 5 % level changes; wall time per round and the kube-apiserver's and etcd's CPU."""
    import yaml
    from kubernetes import client

    from mco_py.kube.client import load_api_client
    from mco_py.store.kube import KubeReportStore

    api = load_api_client(kubeconfig)
    ext = client.ApiextensionsV1Api(api)
    for crd in ("nodeinterferencereports", "nodeinterferencereportshards"):
        doc = yaml.safe_load(Path(f"mco_py/data/crds/{crd}.yaml").read_text())
        try:
            ext.create_custom_resource_definition(doc)
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    time.sleep(2)
    servers = [p for p in psutil.process_iter(["name"]) if p.info["name"] in ("kube-apiserver", "etcd")]

    def server_cpu() -> float:
        return sum(sum(p.cpu_times()[:2]) for p in servers)

    rng = random.Random(seed)
    t = float(int(time.time()))
    levels = {i: LEVELS[i % 4] for i in range(nodes)}
    items = [assessment(i, levels[i], t, rng) for i in range(nodes)]
    builder = ReportBuilder(DEFAULT_STATUS_BUDGET, shards=ShardPlanner(DEFAULT_STATUS_BUDGET))
    store = KubeReportStore(api, name=f"bench-{nodes}", request_timeout=60)
    cpu, wall = server_cpu(), time.monotonic()
    built = builder.build(Report(t, "bench", "v1", tuple(items)))
    store.publish(built)
    print(
        f"{nodes:>6} nodes via the API server: first generation "
        f"({built.shards.index.count if built.shards else 0} shards) {time.monotonic() - wall:.1f} s, "
        f"API server + etcd {server_cpu() - cpu:.1f} CPU-s"
    )
    rounds = []
    for _ in range(intervals):
        t += INTERVAL
        for i in rng.sample(range(nodes), nodes // 20):
            levels[i] = LEVELS[(LEVELS.index(levels[i]) + rng.randint(1, 3)) % 4]
        items = [assessment(i, levels[i], t, rng) for i in range(nodes)]
        built = builder.build(Report(t, "bench", "v1", tuple(items)))
        sent = sum(len(b) for b in request_bodies(built))
        cpu, wall = server_cpu(), time.monotonic()
        store.publish(built)
        rounds.append(
            (time.monotonic() - wall, server_cpu() - cpu, sent, len(built.shards.writes) if built.shards else 0)
        )
    wall_med = sorted(r[0] for r in rounds)[len(rounds) // 2]
    cpu_med = sorted(r[1] for r in rounds)[len(rounds) // 2]
    per_minute = sum(r[2] for r in rounds[-12:]) * 12 / len(rounds[-12:])
    print(
        f"        per 5 s interval (median of {len(rounds)}): write {wall_med:.2f} s, "
        f"API server + etcd {cpu_med:.2f} CPU-s, {sum(r[3] for r in rounds) / len(rounds):.1f} shards; "
        f"{per_minute / 1e6:.1f} MB sent per minute"
    )
    for name in [o["metadata"]["name"] for o in client.CustomObjectsApi(api).list_cluster_custom_object(
        "mco.many-core.io", "v1alpha1", "nodeinterferencereportshards")["items"]]:  # fmt: skip
        client.CustomObjectsApi(api).delete_cluster_custom_object(
            "mco.many-core.io", "v1alpha1", "nodeinterferencereportshards", name
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[10_000, 65_000])
    parser.add_argument("--intervals", type=int, default=24)
    parser.add_argument("--kubeconfig", help="also publish through this (real) API server")
    parser.add_argument("--api-only", action="store_true", help="only the --kubeconfig part")
    args = parser.parse_args()
    if args.kubeconfig:
        for n in args.nodes:
            against_api(args.kubeconfig, n, min(args.intervals, 12))
        if args.api_only:
            return
    print(f"machine: {os.cpu_count()} cores; shard limit {SHARD_LIMIT} B, inline budget {DEFAULT_STATUS_BUDGET} B")
    for n in args.nodes:
        w = writer(n, args.intervals)
        import pickle
        import tempfile

        with tempfile.NamedTemporaryFile(suffix=".pickle", delete=False) as fh:
            pickle.dump((w["objects"], w["rounds"]), fh)
        del w["objects"], w["rounds"]
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        proc = ctx.Process(target=reader, args=(fh.name, queue))
        proc.start()
        r = None
        while r is None:  # a reader that failed puts nothing: say so, do not wait for ever
            try:
                r = queue.get(timeout=5)
            except Empty:
                if not proc.is_alive():
                    failed = f"the reader process failed (exit code {proc.exitcode}); its error is above"
                    raise SystemExit(failed) from None
        proc.join()
        os.unlink(fh.name)
        print(
            f"{n:>6} nodes: {w['shards']} shards (largest {w['largest_shard'] / 1024:.0f} KiB); "
            f"first generation build {w['first_build_ms']:.0f} ms + serialize {w['first_serialize_ms']:.0f} ms, "
            f"{w['first_bytes'] / 1e6:.1f} MB"
        )
        print(
            f"        per interval (median): build {w['build_ms']:.0f} ms + serialize {w['serialize_ms']:.0f} ms CPU; "
            f"{w['bytes_per_minute'] / 1e6:.1f} MB written per minute"
        )
        print(
            f"        reader: {r['reader_nodes']} nodes, load {r['reader_load_s']:.1f} s, "
            f"RSS {r['reader_rss_mb']:.0f} MB (of which the interpreter {r['reader_base_mb']:.0f} MB); one interval's "
            f"{r['reader_events']} shard events applied in {r['reader_interval_ms']:.0f} ms CPU"
        )


if __name__ == "__main__":
    main()
