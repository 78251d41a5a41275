"""Analyzer.Renew over real mTLS: signed for the caller's own names, refused with a status that says why."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from mco_py.analyzer.service import TLSFiles
from mco_py.obs.pki import Signer, load_chain, new_key, signing_request
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb
from mco_py.rpc.analyzer.v1 import analyzer_pb2_grpc as pb_grpc
from tests.analyzer.certs import Issued, TestCA
from tests.analyzer.test_service import Analyzer


@pytest.fixture
def pki(tmp_path: Path) -> tuple[TestCA, Issued, Signer]:
    ca = TestCA(tmp_path)
    signer = ca.intermediate("signer")
    server = ca.issue("server", "ctl-1", ["localhost"], server=True)
    return ca, server, Signer(signer.cert, signer.key, term=600)


def served(ca: TestCA, server: Issued, signer: Signer | None) -> Iterator[Analyzer]:
    a = Analyzer(tls=TLSFiles(server.cert, server.key, ca.path), signer=signer)
    try:
        yield a
    finally:
        a.server.stop(0)


def renew(ca: TestCA, port: int, client: Issued, csr: bytes) -> pb.RenewResponse:
    credentials = grpc.ssl_channel_credentials(ca.path.read_bytes(), client.key.read_bytes(), client.cert.read_bytes())
    options = [("grpc.ssl_target_name_override", "localhost")]
    with grpc.secure_channel(f"127.0.0.1:{port}", credentials, options=options) as channel:
        reply: pb.RenewResponse = pb_grpc.AnalyzerStub(channel).Renew(pb.RenewRequest(csr_pem=csr), timeout=10)
        return reply


def test_a_collector_gets_its_own_names_signed_and_no_other(pki: tuple[TestCA, Issued, Signer]) -> None:
    ca, server, signer = pki
    client = ca.issue("node-1", "node-1", ["node-1"], server=False)
    other = load_chain(ca.issue("node-2", "node-2", ["node-2"], server=False).cert.read_bytes())[0]
    for a in served(ca, server, signer):
        key = new_key()
        reply = renew(ca, a.port, client, signing_request(load_chain(client.cert.read_bytes())[0], key))
        leaf = load_chain(reply.certificate_chain_pem)[0]
        assert leaf.public_key() == key.public_key()
        assert a.metric("mco_analyzer_certificate_renewals_signed_total", result="signed") == 1
        with pytest.raises(grpc.RpcError) as refused:
            renew(ca, a.port, client, signing_request(other, new_key()))
        assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
        assert "a host renews only its own certificate" in refused.value.details()  # type: ignore[attr-defined]
        with pytest.raises(grpc.RpcError) as malformed:
            renew(ca, a.port, client, b"not a request")
        assert malformed.value.code() is grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
        assert a.metric("mco_analyzer_certificate_renewals_signed_total", result="refused") == 2


def test_an_analyzer_without_a_signing_ca_says_so(pki: tuple[TestCA, Issued, Signer]) -> None:
    ca, server, _ = pki
    client = ca.issue("node-1", "node-1", ["node-1"], server=False)
    for a in served(ca, server, None):
        with pytest.raises(grpc.RpcError) as refused:
            renew(ca, a.port, client, signing_request(load_chain(client.cert.read_bytes())[0], new_key()))
        assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION  # type: ignore[attr-defined]
        assert "no signing CA" in refused.value.details()  # type: ignore[attr-defined]


def test_a_caller_asking_again_and_again_writes_a_bounded_log(
    pki: tuple[TestCA, Issued, Signer], caplog: pytest.LogCaptureFixture
) -> None:
    ca, server, signer = pki
    client = ca.issue("node-1", "node-1", ["node-1"], server=False)
    other = load_chain(ca.issue("node-2", "node-2", ["node-2"], server=False).cert.read_bytes())[0]
    own = load_chain(client.cert.read_bytes())[0]
    caplog.set_level(logging.INFO, logger="mco_py.analyzer.service")
    for a in served(ca, server, signer):
        for _ in range(30):
            with pytest.raises(grpc.RpcError):
                renew(ca, a.port, client, signing_request(other, new_key()))
        for _ in range(30):
            renew(ca, a.port, client, signing_request(own, new_key()))
        assert a.metric("mco_analyzer_certificate_renewals_signed_total", result="refused") == 30  # all counted
        assert a.metric("mco_analyzer_certificate_renewals_signed_total", result="signed") == 30
    refused = [r for r in caplog.records if "certificate renewal refused" in r.getMessage()]
    signed = [r for r in caplog.records if "signed a renewed certificate" in r.getMessage()]
    assert 1 <= len(refused) + len(signed) <= 20, (len(refused), len(signed))  # 20 lines a minute at most
