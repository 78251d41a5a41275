"""A CA rotation with a two-CA trust bundle while a collector streams to the analyzer, neither restarted.

The order docs/runbooks.md ("Rotate the CA") gives: the new CA joins every trust bundle, then
every host gets a certificate of the new CA, then the old CA leaves the bundles. The analyzer
and the collector read their files again when they change (new connections get them); the
stream opened before the rotation is never dropped and is acknowledged in every step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from mco_py.analyzer.engine import Engine
from mco_py.analyzer.metrics import AnalyzerMetrics
from mco_py.analyzer.service import GrpcServer, TLSFiles, create_server
from mco_py.collector.signals import NodeSample, Reading
from mco_py.collector.stream import AnalyzerStream, sample_to_proto
from mco_py.config.collector import StreamSettings
from tests.analyzer.certs import TestCA
from tests.rules_fixtures import SIGNAL, quick_rules
from tests.waiting import wait_until

FAST = {"backoff_initial": 0.05, "backoff_max": 0.2, "flush_interval": 0.0}


def install(path: Path, data: bytes) -> None:
    """As the roles install a file: written beside it, then renamed over it."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


class Host:
    """One host's PKI directory: its certificate and key and the trust bundle (ca.pem)."""

    def __init__(self, root: Path, name: str, *, server: bool) -> None:
        self.dir = root / name
        self.dir.mkdir()
        self.name = name
        self.server = server
        self.cert, self.key, self.bundle = self.dir / "cert.pem", self.dir / "key.pem", self.dir / "ca.pem"

    def trust(self, *cas: TestCA) -> None:
        install(self.bundle, b"".join(ca.path.read_bytes() for ca in cas))

    def certify(self, ca: TestCA) -> None:
        issued = ca.issue(f"{self.name}-{ca.path.stem}", self.name, [self.name, "localhost"], server=self.server)
        install(self.key, issued.key.read_bytes())
        install(self.cert, issued.cert.read_bytes())


class Streaming:
    """A collector stream publishing a fresh sample every 20 ms until closed."""

    def __init__(
        self, port: int, host: Host | None = None, *, files: tuple[str, Path, Path, Path] | None = None
    ) -> None:
        """``host``'s files, or ``files``: (node name, trust bundle, certificate, key)."""
        node, bundle, cert, key = files if files else (host.name, host.bundle, host.cert, host.key)  # type: ignore[union-attr]
        settings = StreamSettings(tls_ca=bundle, tls_cert=cert, tls_key=key, tls_server_name="localhost", **FAST)  # type: ignore[arg-type]
        self.stream = AnalyzerStream(f"127.0.0.1:{port}", settings, collector_id=node)
        self.node = node
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._publish, daemon=True)
        self.stream.start()
        self._thread.start()

    def _publish(self) -> None:
        while not self._stop.wait(0.02):
            sample = NodeSample(self.node, time.time(), 1.0, (Reading(SIGNAL, 5.0, "procfs"),))
            self.stream.publish(sample_to_proto(sample))

    def acked(self) -> int:
        return self.stream.status().acked

    def flows(self) -> bool:
        """Samples sent now are acknowledged within seconds."""
        before = self.acked()
        return bool(wait_until(lambda: self.acked() > before + 5, f"{self.node}'s samples acknowledged", 10))

    def refused(self) -> bool:
        """Not one sample acknowledged within 1.5 s."""
        time.sleep(1.5)
        return self.acked() == 0 and not self.stream.status().connected

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.stream.close()


@pytest.fixture
def cas(tmp_path: Path) -> tuple[TestCA, TestCA]:
    (tmp_path / "ca").mkdir()
    return TestCA(tmp_path / "ca", name="mco-ca-old", file="old"), TestCA(
        tmp_path / "ca", name="mco-ca-new", file="new"
    )


def analyzer_on(cert: Path, key: Path, bundle: Path, port: int = 0) -> tuple[GrpcServer, int]:
    """An analyzer serving mTLS with these files (read again when they change)."""
    engine = Engine(quick_rules(), metrics=AnalyzerMetrics(CollectorRegistry()), identity="a1")
    return create_server(engine, listen=f"127.0.0.1:{port}", tls=TLSFiles(cert, key, bundle))


def analyzer(host: Host, port: int = 0) -> tuple[GrpcServer, int]:
    return analyzer_on(host.cert, host.key, host.bundle, port)


@pytest.fixture
def streams() -> Iterator[list[Streaming]]:
    opened: list[Streaming] = []
    yield opened
    for one in opened:
        one.close()


@pytest.mark.timeout(120)
def test_the_ca_is_rotated_with_a_stream_flowing_throughout(
    tmp_path: Path, cas: tuple[TestCA, TestCA], streams: list[Streaming]
) -> None:
    old, new = cas
    ctl, node, late = (Host(tmp_path, n, server=n == "ctl-1") for n in ("ctl-1", "node-a", "node-late"))
    for host in (ctl, node, late):
        host.trust(old)
        host.certify(old)
    server, port = analyzer(ctl)

    def connect(host: Host) -> Streaming:
        streams.append(Streaming(port, host))
        return streams[-1]

    try:
        steady = connect(node)
        assert steady.flows()

        # 1. the new CA joins every trust bundle (but node-late's, a host the step missed)
        ctl.trust(old, new)
        node.trust(old, new)
        assert steady.flows()
        assert connect(node).flows()  # new handshakes: both sides read the new bundles

        # 2. every host gets a certificate of the new CA
        ctl.certify(new)
        node.certify(new)
        assert steady.flows()
        assert connect(node).flows()  # a new-CA client certificate, trusted by the two-CA bundle
        assert connect(late).refused()  # trusts the old CA only: the new server certificate is refused

        # 3. the old CA leaves the bundles
        ctl.trust(new)
        node.trust(new)
        assert steady.flows()
        assert connect(node).flows()
        late.trust(new)
        assert connect(late).refused()  # its certificate is the old CA's: refused by the analyzer

        assert steady.stream.status().reconnects == 0  # the first stream was never dropped
    finally:
        server.stop(0)

    # the stream's own next connection uses the files as they are now (the new CA's)
    server, port = analyzer(ctl, port)
    try:
        assert steady.flows()
        assert steady.stream.status().reconnects >= 1
    finally:
        server.stop(0)


def test_a_half_replaced_certificate_keeps_the_last_good_one(
    tmp_path: Path, cas: tuple[TestCA, TestCA], streams: list[Streaming]
) -> None:
    old, new = cas
    ctl, node, fresh = (Host(tmp_path, n, server=n == "ctl-1") for n in ("ctl-1", "node-a", "node-new"))
    for host in (ctl, node):
        host.trust(old, new)
        host.certify(old)
    fresh.trust(new)  # trusts only the new CA: it tells which certificate the analyzer serves
    fresh.certify(new)
    server, port = analyzer(ctl)
    try:
        issued = new.issue("half", "ctl-1", ["ctl-1", "localhost"], server=True)
        install(ctl.cert, issued.cert.read_bytes())  # the key not yet: the pair does not match
        streams.append(Streaming(port, node))
        assert streams[-1].flows()  # served with the last good certificate and key
        streams.append(Streaming(port, fresh))
        assert streams[-1].refused()  # ... the old CA's
        install(ctl.key, issued.key.read_bytes())
        streams.append(Streaming(port, fresh))
        assert streams[-1].flows()  # the pair complete: the new certificate serves
    finally:
        server.stop(0)


def test_the_collector_keeps_its_last_good_files_until_the_new_ones_match(
    tmp_path: Path, cas: tuple[TestCA, TestCA]
) -> None:
    from mco_py.collector.stream import ChannelTLS

    old, new = cas
    node = Host(tmp_path, "node-a", server=False)
    node.trust(old)
    node.certify(old)
    tls = ChannelTLS(StreamSettings(tls_ca=node.bundle, tls_cert=node.cert, tls_key=node.key))  # type: ignore[arg-type]
    first = tls.credentials()
    assert tls.credentials() is first  # nothing changed: nothing read
    issued = new.issue("half", "node-a", ["node-a"], server=False)
    install(node.cert, issued.cert.read_bytes())  # its key not yet
    assert tls.credentials() is first
    install(node.key, issued.key.read_bytes())
    renewed = tls.credentials()
    assert renewed is not first
    node.bundle.write_text("not a certificate")
    assert tls.credentials() is renewed
