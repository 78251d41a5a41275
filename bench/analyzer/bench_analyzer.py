"""Analyzer benchmark: ingest over real gRPC, report build + serialize, report size vs etcd.

Run: .venv/bin/python -m bench.analyzer.bench_analyzer [--quick]
Prints figures; record them in docs/benchmarks.md ("Analyzer"). Not part of `make test`.

Ingest: the analyzer (server) runs in this process; the simulated collectors run in a
separate process and send pre-encoded SampleBatch messages (several nodes per batch, as
the proto allows; plain values packed, as collectors send them to an analyzer that
announced it), so the figure is the server's cost on one core.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import resource
import time

import grpc
import msgspec
from prometheus_client import CollectorRegistry

from bench.analyzer.bench_shards import request_bodies
from mco_py.analysis.rules import default_rules
from mco_py.analyzer.engine import Engine
from mco_py.analyzer.metrics import AnalyzerMetrics
from mco_py.analyzer.service import create_server
from mco_py.model import Report, Sample
from mco_py.report.builder import ReportBuilder
from mco_py.report.document import encoded_size, entry, report_of
from mco_py.report.size import DEFAULT_STATUS_BUDGET, ETCD_REQUEST_LIMIT, Fitted
from mco_py.store.file import status_document
from mco_py.store.kube import status_body
from tests.rpc import wire

METHOD = "/mco.analyzer.v1.Analyzer/StreamSamples"


def node_name(i: int) -> str:
    return f"worker-{i:05d}.cluster.local"


def realistic(i: int, t: float, rng: random.Random) -> Sample:
    """Signals like a busy-ish fleet (every signal a collector sends): most nodes calm, some loaded."""
    hot = i % 20 == 0
    warm = i % 10 == 1
    base = 90.0 if hot else 35.0 if warm else 3.0
    values = {
        "psiCpuSomeAvg10": base * rng.uniform(0.5, 1.2),
        "psiMemorySomeAvg10": base * rng.uniform(0.0, 0.3),
        "psiMemoryFullAvg10": base * rng.uniform(0.0, 0.05),
        "psiIoSomeAvg10": base * rng.uniform(0.3, 1.1),
        "psiIoFullAvg10": base * rng.uniform(0.1, 0.5),
        # the collector sends the interval rates too (the default rules score them)
        "psiCpuSomeRate": base * rng.uniform(0.5, 1.2),
        "psiMemorySomeRate": base * rng.uniform(0.0, 0.3),
        "psiMemoryFullRate": base * rng.uniform(0.0, 0.05),
        "psiIoSomeRate": base * rng.uniform(0.3, 1.1),
        "psiIoFullRate": base * rng.uniform(0.1, 0.5),
        "llcMissRate": min(1.0, 0.1 + base / 200 * rng.uniform(0.5, 1.5)),
        "bioLatencyP99Ms": base / 3 * rng.uniform(0.5, 2.0),
        "cpuStealPercent": rng.uniform(0, 2),
        "oomKills": 0.0,
    }
    return Sample(node_name(i), t, {k: min(v, 100.0) for k, v in values.items()}, {"bioLatencyP99Ms": 100})


def encoded_batches(nodes: int, rounds: int, per_batch: int, t0: float) -> list[bytes]:
    rng = random.Random(7)
    out: list[bytes] = []
    seq = 0
    for r in range(rounds):
        for start in range(0, nodes, per_batch):
            seq += 1
            samples = [realistic(i, t0 + r * 0.001, rng) for i in range(start, min(nodes, start + per_batch))]
            out.append(
                wire.batch_to_proto(samples, collector="sim", sequence=seq, backend="procfs").SerializeToString()
            )
    return out


def _client(
    port: int,
    payload: list[bytes],
    ranges: int,
    streams: int,
    *,
    ready: mp.Event,  # type: ignore[type-arg]
    result: mp.Queue,  # type: ignore[type-arg]
) -> None:
    # one node range always goes through the same stream, so each node's samples stay in order
    chunks: list[list[bytes]] = [[] for _ in range(streams)]
    for j, batch in enumerate(payload):
        chunks[(j % ranges) % streams].append(batch)
    chunks = [c for c in chunks if c]
    streams = len(chunks)
    channels = [grpc.insecure_channel(f"127.0.0.1:{port}") for _ in range(streams)]
    calls = [ch.stream_stream(METHOD, request_serializer=None, response_deserializer=None) for ch in channels]
    for ch in channels:
        grpc.channel_ready_future(ch).result(timeout=30)
    ready.set()
    import threading

    accepted = [0] * streams

    def run(k: int) -> None:
        from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb

        for raw in calls[k](iter(chunks[k]), timeout=600):
            accepted[k] += pb.Control.FromString(raw).ack.accepted

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(k,)) for k in range(streams)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    result.put((sum(accepted), time.perf_counter() - started))


def bench_ingest(nodes: int, rounds: int, per_batch: int, streams: int) -> dict[str, float]:
    engine = Engine(default_rules(), metrics=AnalyzerMetrics(CollectorRegistry()), identity="bench")
    server, port = create_server(engine, listen="127.0.0.1:0", max_message_bytes=64 * 1024 * 1024)
    t0 = time.time()
    payload = encoded_batches(nodes, rounds, per_batch, t0)
    ctx = mp.get_context("spawn")
    ready, result = ctx.Event(), ctx.Queue()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    ranges = -(-nodes // per_batch)
    proc = ctx.Process(target=_client, args=(port, payload, ranges, streams), kwargs={"ready": ready, "result": result})
    proc.start()
    ready.wait(60)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    accepted, wall = result.get(timeout=900)
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    proc.join(30)
    server.stop(0)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {
        "nodes": nodes,
        "samples": accepted,
        "expected": nodes * rounds,
        "wall_s": wall,
        "samples_per_s": accepted / wall,
        "server_cpu_s": cpu,
        "samples_per_cpu_s": accepted / cpu if cpu else 0.0,
        "batch_bytes": sum(len(p) for p in payload) / len(payload),
    }


def populated(
    nodes: int, *, budget: int | None, registry: CollectorRegistry | None = None, shards: bool = False
) -> Engine:
    """An engine whose nodes have risen to their levels; ``shards``: with the shard planner (cluster mode's default)."""
    registry = registry or CollectorRegistry()
    engine = Engine(
        default_rules(),
        metrics=AnalyzerMetrics(registry),
        identity="bench",
        status_budget=budget,
        shard_refresh_seconds=60.0 if shards else None,
    )
    rng = random.Random(3)
    t = time.time()
    from mco_py.analyzer.engine import Outcome

    for r in range(engine.rules.hysteresis.raise_after + 1):  # long enough for loaded nodes to rise
        wire.accept(engine, [realistic(i, t + r * 0.001, rng) for i in range(nodes)], Outcome())
    return engine


MODES = (
    ("standalone", None, False),
    ("sharded", DEFAULT_STATUS_BUDGET, True),  # cluster mode as deployed (mco_analyzer_report_shards: true)
    ("cluster", DEFAULT_STATUS_BUDGET, False),  # one object, detail stripped to fit (report_shards: false)
)
"""Label, status budget and shard planner of each mode the report figures cover."""


def written(built: Fitted, *, shards: bool) -> bytes:
    """The bytes a store writes for ``built``: with shards, each shard's patch and the report object's body
    (the cluster store's requests); else the status as the file store writes it."""
    if shards:
        return b"".join(request_bodies(built))
    return msgspec.json.encode(status_document(built.status))


def bench_report(nodes: int, repeats: int = 5, *, fresh: bool = False) -> dict[str, float]:
    """Build (assess + size fit, as timed by the generation histogram), metrics publish and serialize.

    ``fresh``: every node gets a new sample before each build (no cached entry can be reused),
    else the nodes are unchanged between builds (every entry comes from the cache after the first).
    """
    out: dict[str, float] = {"nodes": nodes}
    from mco_py.analyzer.engine import Outcome

    for label, budget, shards in MODES:
        registry = CollectorRegistry()
        engine = populated(nodes, budget=budget, registry=registry, shards=shards)
        engine.build_report()  # warm: the first build after start-up fills the caches
        build, total, ser, client_ms, cpu, interval = [], [], [], [], [], []
        size = 0
        rng = random.Random(5)
        for k in range(repeats):
            ingest = 0.0
            if fresh:
                t = time.time() + 1 + k * 0.001
                messages = [wire.sample_to_proto(realistic(i, t, rng), backend="procfs") for i in range(nodes)]
                p0 = time.process_time()
                engine.accept_messages(messages, Outcome())  # decode, check, score: no gRPC
                ingest = time.process_time() - p0
                del messages
            before = registry.get_sample_value("mco_analyzer_report_generation_duration_seconds_sum") or 0.0
            p0 = time.process_time()
            a = time.perf_counter()
            built = engine.build_report()
            b = time.perf_counter()
            data = written(built, shards=shards)
            c = time.perf_counter()
            fitted = built  # as the report loop: the previous report is released after the write
            cpu.append(time.process_time() - p0)
            interval.append(ingest + cpu[-1])
            if label == "cluster":
                status_body("cluster", fitted.status, "1")  # the cluster store's request body
                client_ms.append(time.perf_counter() - c)
            after = registry.get_sample_value("mco_analyzer_report_generation_duration_seconds_sum") or 0.0
            build.append(after - before)
            total.append(b - a)
            ser.append(c - b)
            size = len(data)
        out[f"{label}_build_ms"] = 1000 * sorted(build)[len(build) // 2]
        out[f"{label}_with_metrics_ms"] = 1000 * sorted(total)[len(total) // 2]
        out[f"{label}_serialize_ms"] = 1000 * sorted(ser)[len(ser) // 2]
        out[f"{label}_bytes"] = size
        out[f"{label}_cpu_ms"] = 1000 * sorted(cpu)[len(cpu) // 2]
        out[f"{label}_interval_cpu_ms"] = 1000 * sorted(interval)[len(interval) // 2]
        if client_ms:
            out["cluster_client_encode_ms"] = 1000 * sorted(client_ms)[len(client_ms) // 2]
        out[f"{label}_shards"] = fitted.shards.index.count if fitted.shards else 0
        out[f"{label}_detail_dropped"] = fitted.detail_dropped
        out[f"{label}_nodes_dropped"] = len(fitted.nodes_dropped)
    return out


def entry_sizes(report: Report) -> tuple[float, float, float]:
    """Mean encoded bytes per node entry: full None, full High, bare."""
    from mco_py.model import Level

    none = [encoded_size(entry(n)) for n in report.nodes if n.level is Level.NONE]
    high = [encoded_size(entry(n)) for n in report.nodes if n.level is Level.HIGH]
    bare = [encoded_size(entry(n, detail=False)) for n in report.nodes]
    return (sum(none) / max(1, len(none)), sum(high) / max(1, len(high)), sum(bare) / len(bare))


def bench_size(counts: list[int]) -> list[dict[str, float]]:
    rows = []
    for n in counts:
        engine = populated(n, budget=None)
        status = engine.build_report().status  # every entry in full
        report = report_of(status)
        full = encoded_size(status)
        fitted = ReportBuilder(DEFAULT_STATUS_BUDGET).build(report)
        none, high, bare = entry_sizes(report)
        rows.append(
            {
                "nodes": n,
                "full_bytes": full,
                "fitted_bytes": fitted.size,
                "detail_dropped": fitted.detail_dropped,
                "nodes_dropped": len(fitted.nodes_dropped),
                "entry_none": none,
                "entry_high": high,
                "entry_bare": bare,
            }
        )
    return rows


def report_figures(counts: list[int]) -> None:
    for fresh in (False, True):
        what = "every node has a new sample before each build" if fresh else "no new samples between builds"
        print(f"\n== report build (assess + fit) and serialize (median of 5; {what}) ==")
        for nodes in counts:
            r = bench_report(nodes, fresh=fresh)
            print(
                f"{nodes:>6} nodes: standalone build {r['standalone_build_ms']:.0f} ms (+metrics "
                f"{r['standalone_with_metrics_ms'] - r['standalone_build_ms']:.0f} ms) + serialize "
                f"{r['standalone_serialize_ms']:.0f} ms ({r['standalone_bytes'] / 1e6:.2f} MB), CPU "
                f"{r['standalone_cpu_ms']:.0f} ms; cluster, one object: build {r['cluster_build_ms']:.0f} ms "
                f"(+metrics {r['cluster_with_metrics_ms'] - r['cluster_build_ms']:.0f} ms)"
                f" + serialize {r['cluster_serialize_ms']:.0f} ms, CPU {r['cluster_cpu_ms']:.0f} ms "
                f"({r['cluster_bytes'] / 1e6:.2f} MB, detail dropped {r['cluster_detail_dropped']:.0f}, "
                f"nodes dropped {r['cluster_nodes_dropped']:.0f}); cluster store request body "
                f"{r['cluster_client_encode_ms']:.0f} ms (writer thread)"
            )
            print(
                f"{'':>13} cluster with shards (the default): build {r['sharded_build_ms']:.0f} ms + request bodies "
                f"{r['sharded_serialize_ms']:.0f} ms ({r['sharded_bytes'] / 1e6:.2f} MB, {r['sharded_shards']:.0f} "
                f"shards), CPU {r['sharded_cpu_ms']:.0f} ms"
            )
            if fresh:
                print(
                    f"{'':>13} CPU per interval (accepting one sample per node in-process, build, serialize; "
                    f"the previous report freed meanwhile): standalone {r['standalone_interval_cpu_ms']:.0f} ms, "
                    f"cluster {r['cluster_interval_cpu_ms']:.0f} ms, with shards {r['sharded_interval_cpu_ms']:.0f} ms"
                )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller runs")
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--per-batch", type=int, default=250)
    parser.add_argument("--report-only", action="store_true", help="only the report build + serialize figures")
    parser.add_argument("--ingest-only", action="store_true", help="only the ingest figures")
    args = parser.parse_args()
    import timeit

    per_call = min(timeit.repeat("round(1.23456789, 4)", number=100_000, repeat=5)) / 100_000
    print(
        f"host: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; calibration: round(x, 4) takes "
        f"{per_call * 1e9:.0f} ns (compare runs by this figure: the machine may be shared)"
    )
    if args.report_only:
        report_figures([1000, 10000])
        return
    print("\n== ingest over gRPC (server in this process, clients in another) ==")
    for nodes, rounds in ((1000, 5 if args.quick else 30), (10000, 1 if args.quick else 8)):
        r = bench_ingest(nodes, rounds, args.per_batch, args.streams)
        print(
            f"{nodes:>6} nodes: {r['samples']:.0f}/{r['expected']:.0f} samples in {r['wall_s']:.2f}s = "
            f"{r['samples_per_s']:,.0f} samples/s wall; server CPU {r['server_cpu_s']:.2f}s = "
            f"{r['samples_per_cpu_s']:,.0f} samples per CPU-second; batch {r['batch_bytes'] / 1024:.0f} KiB"
        )
    if args.ingest_only:
        return
    report_figures([1000, 5000, 10000])
    print(
        f"\n== report size vs etcd request limit {ETCD_REQUEST_LIMIT:,} B "
        f"(status budget {DEFAULT_STATUS_BUDGET:,} B) =="
    )
    for row in bench_size([1000, 5000, 10000, 15000] if args.quick else [1000, 5000, 10000, 15000, 20000]):
        print(
            f"{row['nodes']:>6} nodes: full {row['full_bytes'] / 1e6:.2f} MB -> "
            f"fitted {row['fitted_bytes'] / 1e6:.2f} MB; "
            f"detail dropped {row['detail_dropped']:.0f}, nodes dropped {row['nodes_dropped']:.0f}; "
            f"entry bytes None {row['entry_none']:.0f}, High {row['entry_high']:.0f}, bare {row['entry_bare']:.0f}"
        )


if __name__ == "__main__":
    main()
