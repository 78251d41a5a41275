"""The gRPC endpoint over real sockets: acks, bad input, many streams, token, TLS and mTLS."""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from prometheus_client import CollectorRegistry

from mco_py.analysis.guard import GuardRules
from mco_py.analyzer.engine import Engine
from mco_py.analyzer.metrics import AnalyzerMetrics
from mco_py.analyzer.service import TLSFiles, create_server, transport_limit
from mco_py.errors import ConfigError
from mco_py.model import Level, Sample
from mco_py.report.document import report_of
from mco_py.rpc import codec
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb
from mco_py.rpc.analyzer.v1 import analyzer_pb2_grpc as pb_grpc
from tests.analyzer.certs import TestCA
from tests.rpc import wire
from tests.rules_fixtures import SIGNAL, quick_rules


class Analyzer:
    def __init__(self, **server_args: object) -> None:
        self.registry = CollectorRegistry()
        self.engine = Engine(quick_rules(), metrics=AnalyzerMetrics(self.registry), identity="test")
        self.server, self.port = create_server(self.engine, listen="127.0.0.1:0", **server_args)  # type: ignore[arg-type]

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def rejected(self, reason: str) -> float:
        return self.metric("mco_analyzer_samples_total", result="rejected", reason=reason)


@pytest.fixture
def analyzer() -> Iterator[Analyzer]:
    a = Analyzer()
    yield a
    a.server.stop(0)


def good(node: str, psi: float = 10.0, *, t: float | None = None) -> Sample:
    return Sample(node, time.time() if t is None else t, {SIGNAL: psi})


def stream(channel: grpc.Channel, batches: list[pb.SampleBatch], **kw: object) -> list[pb.Control]:
    """The acks of a stream that sends ``batches`` (other control messages left out)."""
    stub = pb_grpc.AnalyzerStub(channel)
    replies = stub.StreamSamples(iter(batches), timeout=30, **kw)  # type: ignore[arg-type]
    return [r for r in replies if r.WhichOneof("kind") == "ack"]


def test_a_stream_opens_with_the_rules_warn_values_and_gets_new_ones_after_a_rules_change(
    analyzer: Analyzer,
) -> None:
    rules = quick_rules()
    requests: queue.Queue[pb.SampleBatch | None] = queue.Queue()

    def batches() -> Iterator[pb.SampleBatch]:
        while (item := requests.get()) is not None:
            yield item

    with grpc.insecure_channel(f"127.0.0.1:{analyzer.port}") as ch:
        replies = pb_grpc.AnalyzerStub(ch).StreamSamples(batches(), timeout=30)
        assert next(replies).features.packed_values, "a stream opens with what the analyzer reads"
        first = next(replies)
        assert first.WhichOneof("kind") == "send_early"
        assert dict(first.send_early.above) == {n: r.warn for n, r in rules.signals.items()}
        guard = next(replies)
        assert guard.WhichOneof("kind") == "guard_rules", "the default rules have a guard section"
        assert codec.guard_rules_from_proto(guard.guard_rules) == rules.guard
        stricter = GuardRules(throttle_above=20)
        analyzer.engine.set_rules(
            dataclasses.replace(rules, version="stricter", dimensions=rules.dimensions[:1], guard=stricter)
        )
        requests.put(wire.batch_to_proto([good("node-1")], collector="c", sequence=1))
        assert next(replies).WhichOneof("kind") == "ack"
        again = next(replies)
        assert again.WhichOneof("kind") == "send_early"
        assert set(again.send_early.above) == set(rules.dimensions[0].signals)
        assert codec.guard_rules_from_proto(next(replies).guard_rules) == stricter
        analyzer.engine.set_rules(dataclasses.replace(rules, version="no guard section", guard=None))
        requests.put(wire.batch_to_proto([good("node-1", t=time.time() + 0.001)], collector="c", sequence=2))
        assert [next(replies).WhichOneof("kind") for _ in range(2)] == ["ack", "send_early"]
        requests.put(None)
        assert list(replies) == []


def test_good_and_bad_samples_in_one_batch_are_acked_separately(analyzer: Analyzer) -> None:
    now = time.time()
    samples = [
        good("node-a", 60.0),
        Sample("node-b", now, {SIGNAL: float("nan")}),
        Sample("node-c", now, {SIGNAL: 120.0}),
        Sample("node-d", now, {"llcMissRate": 1.5}),
        Sample("Bad_Name", now, {}),
        Sample("x" * 300, now, {}),
        Sample("node-e", now + 3600, {}),
        Sample("node-f", now - 3600, {}),
        good("node-g", 5.0),
    ]
    batch = wire.batch_to_proto(samples, collector="c1", sequence=41, dropped_since_last=5)
    batch.samples.append(
        pb.Sample(node="node-h", timestamp_unix_nanos=int(now * 1e9), signals=[pb.Signal(name="oomKills", value=1)] * 2)
    )
    with grpc.insecure_channel(f"127.0.0.1:{analyzer.port}") as ch:
        (reply,) = stream(ch, [batch])
    ack = reply.ack
    assert (ack.sequence, ack.accepted, ack.rejected) == (41, 2, 8)
    text = "\n".join(ack.reject_reasons)
    for code in ("non_finite_value", "out_of_range", "invalid_node_name", "future_timestamp", "past_timestamp"):
        assert code in text
    assert "duplicate_signal" in text
    assert analyzer.rejected("out_of_range") == 2
    assert analyzer.rejected("invalid_node_name") == 2
    assert analyzer.metric("mco_analyzer_samples_total", result="accepted", reason="none") == 2
    assert analyzer.metric("mco_analyzer_collector_dropped_samples_total") == 5
    report = report_of(analyzer.engine.build_report().status)
    assert [n.name for n in report.nodes] == ["node-a", "node-g"]
    assert report.node("node-a").level is Level.HIGH  # type: ignore[union-attr]


def test_replayed_sample_is_rejected_as_out_of_order(analyzer: Analyzer) -> None:
    s = good("node-a")
    with grpc.insecure_channel(f"127.0.0.1:{analyzer.port}") as ch:
        batches = [wire.batch_to_proto([s], collector="c", sequence=n) for n in (1, 2)]
        replies = stream(ch, batches)
    assert [r.ack.accepted for r in replies] == [1, 0]
    assert "out_of_order" in replies[1].ack.reject_reasons[0]


def test_many_streams_at_once_and_a_bad_one_harms_nobody(analyzer: Analyzer) -> None:
    results: dict[int, list[int]] = {}

    def collector(i: int) -> None:
        with grpc.insecure_channel(f"127.0.0.1:{analyzer.port}") as ch:
            batches = []
            for seq in range(5):
                t = time.time() + seq * 0.001
                value = float("inf") if i == 0 else 10.0
                batches.append(wire.batch_to_proto([good(f"node-{i}", value, t=t)], collector=f"c{i}", sequence=seq))
            results[i] = [r.ack.accepted for r in stream(ch, batches)]

    threads = [threading.Thread(target=collector, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results[0] == [0] * 5
    assert all(results[i] == [1] * 5 for i in range(1, 30))
    assert len(report_of(analyzer.engine.build_report().status).nodes) == 29


def test_oversize_batch_is_rejected_counted_and_the_stream_goes_on() -> None:
    a = Analyzer(max_message_bytes=64 * 1024)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{a.port}") as ch:
            big = wire.batch_to_proto([good(f"node-{i}") for i in range(3000)], collector="big", sequence=1)
            assert 64 * 1024 < big.ByteSize() <= transport_limit(64 * 1024)
            after = wire.batch_to_proto([good("node-1", t=time.time() + 1)], collector="big", sequence=2)
            first, second = stream(ch, [big, after])
            assert (first.ack.accepted, first.ack.rejected) == (0, 3000)
            assert "oversize_message" in first.ack.reject_reasons[0]
            assert "--max-message-bytes" in first.ack.reject_reasons[0]
            assert second.ack.accepted == 1
        assert a.rejected("oversize_message") == 3000
        assert len(report_of(a.engine.build_report().status).nodes) == 1
    finally:
        a.server.stop(0)


def test_batch_over_the_transport_limit_fails_only_its_stream() -> None:
    a = Analyzer(max_message_bytes=16 * 1024)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{a.port}") as ch:
            huge = wire.batch_to_proto([good(f"node-{i}") for i in range(3000)], collector="big", sequence=1)
            assert huge.ByteSize() > transport_limit(16 * 1024)
            with pytest.raises(grpc.RpcError) as err:
                stream(ch, [huge])
            assert err.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            (ok,) = stream(ch, [wire.batch_to_proto([good("node-1")], collector="small", sequence=1)])
            assert ok.ack.accepted == 1
    finally:
        a.server.stop(0)


def test_connected_collectors_gauge_follows_open_streams(analyzer: Analyzer) -> None:
    feed: queue.Queue[pb.SampleBatch | None] = queue.Queue()

    def requests() -> Iterator[pb.SampleBatch]:
        while (item := feed.get()) is not None:
            yield item

    with grpc.insecure_channel(f"127.0.0.1:{analyzer.port}") as ch:
        replies = pb_grpc.AnalyzerStub(ch).StreamSamples(requests(), timeout=30)
        feed.put(wire.batch_to_proto([good("node-1")], collector="c", sequence=1))
        assert [next(replies).WhichOneof("kind") for _ in range(4)] == ["features", "send_early", "guard_rules", "ack"]
        assert analyzer.metric("mco_analyzer_connected_collectors") == 1
        feed.put(None)
        assert list(replies) == []
    deadline = time.monotonic() + 30
    while analyzer.metric("mco_analyzer_connected_collectors") != 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert analyzer.metric("mco_analyzer_connected_collectors") == 0


def test_bearer_token_is_required() -> None:
    a = Analyzer(token="s3cret")
    batch = wire.batch_to_proto([good("node-1")], collector="c", sequence=1)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{a.port}") as ch:
            for metadata in ([], [("authorization", "Bearer wrong")], [("authorization", "s3cret")]):
                with pytest.raises(grpc.RpcError) as err:
                    stream(ch, [batch], metadata=metadata)
                assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
                assert "bearer token" in (err.value.details() or "")
            (ok,) = stream(ch, [batch], metadata=[("authorization", "Bearer s3cret")])
            assert ok.ack.accepted == 1
        assert a.metric("mco_analyzer_streams_rejected_total", reason="unauthenticated") == 3
    finally:
        a.server.stop(0)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("pki"))


def secure(port: int, ca: TestCA, client: tuple[Path, Path] | None = None) -> grpc.Channel:
    creds = grpc.ssl_channel_credentials(
        root_certificates=ca.path.read_bytes(),
        private_key=client[1].read_bytes() if client else None,
        certificate_chain=client[0].read_bytes() if client else None,
    )
    return grpc.secure_channel(f"localhost:{port}", creds)


def test_tls_server(ca: TestCA) -> None:
    server_cert = ca.issue("server", "mco-analyzer", ["localhost"], server=True)
    a = Analyzer(tls=TLSFiles(server_cert.cert, server_cert.key))
    try:
        with secure(a.port, ca) as ch:
            (ok,) = stream(ch, [wire.batch_to_proto([good("node-1")], collector="c", sequence=1)])
        assert ok.ack.accepted == 1
        with grpc.insecure_channel(f"localhost:{a.port}") as ch, pytest.raises(grpc.RpcError):
            stream(ch, [wire.batch_to_proto([good("node-2")], collector="c", sequence=1)])
    finally:
        a.server.stop(0)


def test_mtls_limits_a_collector_to_its_own_nodes(ca: TestCA) -> None:
    server_cert = ca.issue("server2", "mco-analyzer", ["localhost"], server=True)
    client = ca.issue("node-1", "node-1", ["node-1", "node-1.lab"], server=False)
    a = Analyzer(tls=TLSFiles(server_cert.cert, server_cert.key, ca.path), token="tok")
    md = [("authorization", "Bearer tok")]
    try:
        with secure(a.port, ca, (client.cert, client.key)) as ch:
            batch = wire.batch_to_proto(
                [good("node-1"), good("node-1.lab"), good("node-2")], collector="node-1", sequence=1
            )
            (reply,) = stream(ch, [batch], metadata=md)
        assert (reply.ack.accepted, reply.ack.rejected) == (2, 1)
        assert "unauthorized_node: node node-2" in reply.ack.reject_reasons[0]
        assert a.rejected("unauthorized_node") == 1
        with secure(a.port, ca) as ch, pytest.raises(grpc.RpcError) as err:
            stream(ch, [wire.batch_to_proto([good("node-1")], collector="x", sequence=1)], metadata=md)
        assert err.value.code() is grpc.StatusCode.UNAVAILABLE, "no client certificate: handshake refused"
    finally:
        a.server.stop(0)


def test_garbage_bytes_end_only_that_stream(analyzer: Analyzer) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{analyzer.port}") as ch:
        raw = ch.stream_stream("/mco.analyzer.v1.Analyzer/StreamSamples")
        with pytest.raises(grpc.RpcError):
            list(raw(iter([b"\xff\xfe not a protobuf \x00\x01"]), timeout=30))
        (ok,) = stream(ch, [wire.batch_to_proto([good("node-1")], collector="c", sequence=1)])
    assert ok.ack.accepted == 1


def test_unknown_signals_are_ignored_and_nodes_are_capped() -> None:
    a = Analyzer()
    a.engine.max_nodes = 3
    try:
        now = time.time()
        odd = Sample("node-0", now, {f"futureSignal{i}": 1e9 for i in range(50)})
        batch = wire.batch_to_proto([odd, *(good(f"node-{i}") for i in range(1, 5))], collector="c", sequence=1)
        with grpc.insecure_channel(f"127.0.0.1:{a.port}") as ch:
            (reply,) = stream(ch, [batch])
        assert (reply.ack.accepted, reply.ack.rejected) == (3, 2)
        assert "too_many_nodes" in reply.ack.reject_reasons[0]
        report = report_of(a.engine.build_report().status)
        assert report.node("node-0").signals == {}  # type: ignore[union-attr]
        assert report.node("node-0").level is Level.UNKNOWN  # type: ignore[union-attr]
    finally:
        a.server.stop(0)


def test_unusable_address_is_a_config_error() -> None:
    a = Analyzer()
    try:
        with pytest.raises(ConfigError, match=r"cannot serve gRPC on 127\.0\.0\.1:"):
            create_server(a.engine, listen=f"127.0.0.1:{a.port}")
    finally:
        a.server.stop(0)
