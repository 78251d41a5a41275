"""The gRPC stream against real servers on port 0: fan-out, token, absences on the wire,
server killed and restarted mid-stream, bounded buffer with counted drops, mTLS."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest

from mco_py.collector.signals import Absence, NodeSample, Reading
from mco_py.collector.stream import AnalyzerStream, StreamFanout, sample_to_proto, unpacked
from mco_py.config.collector import StreamSettings
from mco_py.errors import ConfigError
from mco_py.rpc import codec
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb
from mco_py.rpc.analyzer.v1 import analyzer_pb2_grpc as pb_grpc
from tests.waiting import wait_until


class Recorder(pb_grpc.AnalyzerServicer):
    """A minimal analyzer: records batches and metadata, acks each batch."""

    def __init__(
        self, *, set_interval_ms: int = 0, send_early: dict[str, float] | None = None, packed: bool = False
    ) -> None:
        self.packed = packed
        """Announce the packed values, as the analyzer does (False: an analyzer from before them)."""
        self.batches: list[pb.SampleBatch] = []
        self.metadata: list[dict[str, str]] = []
        self.cond = threading.Condition()
        self._set_interval_ms = set_interval_ms
        self._send_early = send_early

    def StreamSamples(
        self, request_iterator: Iterator[pb.SampleBatch], context: grpc.ServicerContext
    ) -> Iterator[pb.Control]:  # type: ignore[override]
        with self.cond:
            self.metadata.append({k: str(v) for k, v in context.invocation_metadata()})
        if self.packed:
            yield codec.features()
        if self._set_interval_ms:
            yield pb.Control(set_interval=pb.SetInterval(interval_ms=self._set_interval_ms))
        if self._send_early is not None:
            yield pb.Control(send_early=pb.SendEarly(above=self._send_early))
        for batch in request_iterator:
            with self.cond:
                self.batches.append(batch)
                self.cond.notify_all()
            yield pb.Control(ack=pb.Ack(sequence=batch.sequence, accepted=len(batch.samples)))

    def samples(self) -> list[pb.Sample]:
        with self.cond:
            return [s for b in self.batches for s in b.samples]

    def wait_samples(self, count: int, timeout: float = 30.0) -> list[pb.Sample]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while sum(len(b.samples) for b in self.batches) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"only {sum(len(b.samples) for b in self.batches)} of {count} samples arrived"
                self.cond.wait(left)
        return self.samples()


def serve(
    servicer: Recorder, port: int = 0, credentials: grpc.ServerCredentials | None = None
) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_AnalyzerServicer_to_server(servicer, server)
    address = f"127.0.0.1:{port}"
    bound = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
    assert bound, f"cannot bind {address}"
    server.start()
    return server, bound


def make_sample(i: int) -> NodeSample:
    return NodeSample(
        node="node-a",
        timestamp=1_800_000_000.0 + i,
        interval=1.0,
        readings=(
            Reading("psiIoSomeAvg10", 12.5 + i, "procfs"),
            Reading("bioLatencyP99Ms", 1.75, "libbpf", events=3014),
            Reading("bioLatencyP99Ms", 1.5, "libbpf", device="vda", events=3000),
            Reading.absent("llcMissRate", "perf", Absence.UNSUPPORTED, "perf_event_open: ENOENT (no PMU)"),
        ),
        backends={"psi": "procfs"},
    )


FAST = {"backoff_initial": 0.05, "backoff_max": 0.2, "flush_interval": 0.0}


def test_sample_to_proto() -> None:
    message = sample_to_proto(make_sample(0))
    assert message.node == "node-a"
    assert message.timestamp_unix_nanos == 1_800_000_000 * 10**9
    assert message.interval_ms == 1000
    assert (list(message.value_names), list(message.values)) == (["psiIoSomeAvg10"], [12.5]), "plain values go packed"
    by = {(s.name, s.device): s for s in message.signals}
    assert set(by) == {("bioLatencyP99Ms", ""), ("bioLatencyP99Ms", "vda"), ("llcMissRate", "")}
    p99 = by[("bioLatencyP99Ms", "")]
    assert p99.HasField("events")
    assert p99.events == 3014
    assert p99.backend == "libbpf"
    llc = by[("llcMissRate", "")]
    assert llc.WhichOneof("value_or_absence") == "absent"
    assert llc.absent.kind == pb.ABSENCE_KIND_UNSUPPORTED
    assert "ENOENT" in llc.absent.reason


def test_unpacked_is_the_first_form_of_the_same_sample() -> None:
    packed = sample_to_proto(make_sample(0))
    first = unpacked(packed)
    assert not first.value_names
    assert not first.values
    plain = first.signals[0]
    assert (plain.name, plain.value, plain.HasField("events"), plain.device) == ("psiIoSomeAvg10", 12.5, False, "")
    assert list(first.signals[1:]) == list(packed.signals)
    assert (first.node, first.timestamp_unix_nanos, first.interval_ms) == (
        packed.node,
        packed.timestamp_unix_nanos,
        packed.interval_ms,
    )
    assert codec.sample_from_proto(first) == codec.sample_from_proto(packed)


def test_values_go_packed_only_to_an_analyzer_that_announced_them() -> None:
    """A new analyzer gets the packed form once its Features arrived; after a reconnect to an older
    analyzer (a rollback), every value goes as a Signal again."""
    new = Recorder(packed=True)
    server, port = serve(new)
    stream = AnalyzerStream(f"127.0.0.1:{port}", StreamSettings(**FAST), collector_id="node-a")
    try:
        stream.start()
        stream.publish(sample_to_proto(make_sample(0)))
        new.wait_samples(1)
        wait_until(lambda: stream.status().sent == 1, what="the first ack (after the Features)")
        stream.publish(sample_to_proto(make_sample(1)))
        second = new.wait_samples(2)[1]
        assert list(second.value_names) == ["psiIoSomeAvg10"]
        # acknowledged before the server goes: an unacknowledged sample is sent again on the next
        # connection (at least once), and the old analyzer would then get two
        wait_until(lambda: stream.status().sent == 2, what="the second ack")
        server.stop(None).wait()
        wait_until(lambda: not stream.status().connected, what="disconnect noticed")
        old = Recorder()
        server, _ = serve(old, port)
        stream.publish(sample_to_proto(make_sample(2)))
        [third] = old.wait_samples(1)
        assert not third.value_names
        assert [(s.name, s.device) for s in third.signals] == [
            ("psiIoSomeAvg10", ""),
            ("bioLatencyP99Ms", ""),
            ("bioLatencyP99Ms", "vda"),
            ("llcMissRate", ""),
        ]
    finally:
        stream.close()
        server.stop(None)


def test_fanout_to_two_analyzers_with_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    first, second = Recorder(), Recorder(set_interval_ms=2500)
    server1, port1 = serve(first)
    server2, port2 = serve(second)
    intervals: list[float] = []
    fanout = StreamFanout(
        StreamSettings(analyzers=(f"127.0.0.1:{port1}", f"127.0.0.1:{port2}"), token_file=token, **FAST),
        collector_id="node-a",
        on_set_interval=intervals.append,
    )
    try:
        fanout.start()
        for i in range(3):
            fanout.publish(make_sample(i))
        for recorder in (first, second):
            samples = recorder.wait_samples(3)
            assert [s.timestamp_unix_nanos for s in samples] == [(1_800_000_000 + i) * 10**9 for i in range(3)]
            assert recorder.metadata[0]["authorization"] == "Bearer s3cret"
            assert recorder.batches[0].collector == "node-a"
        wait_until(lambda: all(s.connected and s.sent == 3 for s in fanout.statuses()), what="acks")
        assert intervals == [2.5]
    finally:
        fanout.close()
        server1.stop(None)
        server2.stop(None)


def test_server_restart_reconnects_and_counts_drops() -> None:
    recorder = Recorder()
    server, port = serve(recorder)
    stream = AnalyzerStream(f"127.0.0.1:{port}", StreamSettings(buffer_samples=5, **FAST), collector_id="node-a")
    try:
        stream.start()
        for i in range(2):
            stream.publish(sample_to_proto(make_sample(i)))
        recorder.wait_samples(2)
        # both acks processed: an ack still in flight when the server dies would put its
        # sample back into the buffer (one more drop below)
        wait_until(lambda: stream.status().sent == 2, what="both samples acknowledged")
        server.stop(None).wait()
        wait_until(lambda: not stream.status().connected, what="disconnect noticed")
        for i in range(2, 14):  # 12 samples into a buffer of 5: the 7 oldest are dropped
            stream.publish(sample_to_proto(make_sample(i)))
        status = stream.status()
        assert status.buffered == 5
        assert status.dropped == 7
        time.sleep(0.3)  # several reconnect attempts against a closed port
        restarted = Recorder()
        server, _ = serve(restarted, port)
        samples = restarted.wait_samples(5)
        assert [s.timestamp_unix_nanos // 10**9 - 1_800_000_000 for s in samples] == list(range(9, 14))
        assert sum(b.dropped_since_last for b in restarted.batches) == 7
        wait_until(lambda: stream.status().connected and stream.status().sent >= 7, what="reconnected, acks in")
        final = stream.status()
        assert final.reconnects >= 1
        assert final.sent == 7
        assert final.buffered == 0
    finally:
        stream.close()
        server.stop(None)


def test_analyzer_down_keeps_memory_bounded() -> None:
    """Nobody listens: the buffer stays at its bound, every extra sample is counted as dropped."""
    stream = AnalyzerStream("127.0.0.1:1", StreamSettings(buffer_samples=50, **FAST), collector_id="n")
    try:
        stream.start()
        for i in range(1000):
            stream.publish(sample_to_proto(make_sample(i)))
        status = stream.status()
        assert status.buffered == 50
        assert status.dropped == 950
        assert not status.connected
    finally:
        stream.close()


def test_missing_token_file_is_a_config_error(tmp_path: Path) -> None:
    stream = AnalyzerStream("127.0.0.1:1", StreamSettings(token_file=tmp_path / "absent", **FAST), collector_id="n")
    stream.start()
    stream.close()  # logs the problem, does not crash
    with pytest.raises(ConfigError, match=re.escape("stream.tlsCert and stream.tlsKey")):
        AnalyzerStream("127.0.0.1:1", StreamSettings(tls_cert=tmp_path / "c"), collector_id="n")


def _make_pki(tmp_path: Path) -> dict[str, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.now(UTC)

    def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def cert(
        *,
        subject: str,
        key: ec.EllipticCurvePrivateKey,
        issuer: x509.Name,
        signer: ec.EllipticCurvePrivateKey,
        ca: bool,
        san: str | None,
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=1))
            .not_valid_after(now + timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(san)]), critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mco-test-ca")])
    ca_cert = cert(subject="mco-test-ca", key=ca_key, issuer=ca_name, signer=ca_key, ca=True, san=None)
    server_key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    pem = serialization.Encoding.PEM
    return {
        "ca": ca_cert.public_bytes(pem),
        "server_cert": cert(
            subject="analyzer", key=server_key, issuer=ca_name, signer=ca_key, ca=False, san="analyzer.mco.test"
        ).public_bytes(pem),
        "server_key": pem_key(server_key),
        "client_cert": cert(
            subject="node-a", key=client_key, issuer=ca_name, signer=ca_key, ca=False, san="node-a"
        ).public_bytes(pem),
        "client_key": pem_key(client_key),
    }


def test_mutual_tls(tmp_path: Path) -> None:
    pki = _make_pki(tmp_path)
    for name, data in pki.items():
        (tmp_path / name).write_bytes(data)
    credentials = grpc.ssl_server_credentials(
        [(pki["server_key"], pki["server_cert"])], root_certificates=pki["ca"], require_client_auth=True
    )
    recorder = Recorder()
    server, port = serve(recorder, credentials=credentials)
    tls = {"tls_ca": tmp_path / "ca", "tls_server_name": "analyzer.mco.test"}
    good = AnalyzerStream(
        f"127.0.0.1:{port}",
        StreamSettings(tls_cert=tmp_path / "client_cert", tls_key=tmp_path / "client_key", **tls, **FAST),  # type: ignore[arg-type]
        collector_id="node-a",
    )
    no_cert = AnalyzerStream(f"127.0.0.1:{port}", StreamSettings(**tls, **FAST), collector_id="intruder")  # type: ignore[arg-type]
    try:
        no_cert.start()
        no_cert.publish(sample_to_proto(make_sample(99)))
        good.start()
        good.publish(sample_to_proto(make_sample(1)))
        samples = recorder.wait_samples(1)
        time.sleep(0.3)
        assert [s.timestamp_unix_nanos for s in recorder.samples()] == [samples[0].timestamp_unix_nanos]
        assert not no_cert.status().connected
        assert all(b.collector == "node-a" for b in recorder.batches)
    finally:
        good.close()
        no_cert.close()
        server.stop(None)


def _first_sample_sent(
    flush_interval_s: float, send_early: dict[str, float] | None = None
) -> tuple[Recorder, grpc.Server, AnalyzerStream]:
    """A stream with the given flush interval whose first sample reached the recorder (it goes at once)."""
    recorder = Recorder(send_early=send_early)
    server, port = serve(recorder)
    config = StreamSettings(backoff_initial=0.05, backoff_max=0.2, flush_interval=flush_interval_s)
    stream = AnalyzerStream(f"127.0.0.1:{port}", config, collector_id="node-a")
    stream.start()
    stream.publish(sample_to_proto(make_sample(0)))
    recorder.wait_samples(1)
    return recorder, server, stream


def test_flush_interval_batches_samples_and_loses_none() -> None:
    recorder, server, stream = _first_sample_sent(0.5)
    try:
        for i in range(1, 6):  # published within the flush interval: they travel together
            stream.publish(sample_to_proto(make_sample(i)))
        samples = recorder.wait_samples(6)
    finally:
        stream.close()
        server.stop(None)
    assert [s.timestamp_unix_nanos // 10**9 - 1_800_000_000 for s in samples] == list(range(6))
    assert len(recorder.batches[0].samples) == 1
    assert len(recorder.batches) < 6  # at least two of the five later samples shared a message


def test_stop_sends_what_gathered_during_a_long_flush_interval() -> None:
    recorder, server, stream = _first_sample_sent(60.0)
    try:
        wait_until(lambda: stream.status().sent == 1, what="first ack")
        for i in range(1, 4):
            stream.publish(sample_to_proto(make_sample(i)))
        assert stream.status().buffered == 3  # waiting for the flush interval
        stream.close()
        status = stream.status()
    finally:
        server.stop(None)
    assert len(recorder.samples()) == 4
    assert status.sent == 4  # acknowledged before the stream closed
    assert status.buffered == 0


def test_a_sample_past_the_analyzers_send_early_value_ends_the_flush_wait() -> None:
    recorder, server, stream = _first_sample_sent(60.0, send_early={"psiCpuSomeRate": 20.0})
    try:
        wait_until(lambda: stream.status().sent == 1, what="first ack")
        calm, hot = make_sample(1), make_sample(2)
        stream.publish(sample_to_proto(calm), {"psiCpuSomeRate": 3.0})
        time.sleep(0.3)
        assert stream.status().buffered == 1, "a calm sample waits for the flush interval"
        started = time.monotonic()
        stream.publish(sample_to_proto(hot), {"psiCpuSomeRate": 65.0})
        recorder.wait_samples(3, timeout=5)  # the calm one travels with it
        assert time.monotonic() - started < 5, "a hot sample goes at once, not after 60 s"
        stream.publish(sample_to_proto(make_sample(3)), {"psiCpuSomeRate": 1.0})
        recorder.wait_samples(4, timeout=5)  # the first calm sample after a hot one goes at once too
        wait_until(lambda: stream.status().sent == 4, what="ack of the fourth")
        time.sleep(0.2)  # the writer is back in its flush wait
        stream.publish(sample_to_proto(make_sample(4)), {"psiCpuSomeRate": 1.0})
        time.sleep(0.3)
        assert stream.status().buffered == 1, "then calm samples are batched again"
    finally:
        stream.close()
        server.stop(None)


def test_without_send_early_values_every_sample_waits_for_the_flush_interval() -> None:
    recorder, server, stream = _first_sample_sent(60.0)
    try:
        wait_until(lambda: stream.status().sent == 1, what="first ack")
        stream.publish(sample_to_proto(make_sample(1)), {"psiCpuSomeRate": 99.0})
        time.sleep(0.5)
        assert stream.status().buffered == 1
        assert len(recorder.samples()) == 1
    finally:
        stream.close()
        server.stop(None)
