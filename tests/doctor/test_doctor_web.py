"""mco doctor reads /metrics of ports that serve TLS, and says which ask for credentials it does not have."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from prometheus_client import CollectorRegistry, Counter

from mco_py.doctor.checks import PartView, Verdict, judge
from mco_py.doctor.probe import probe_host
from mco_py.obs.http import RunningServer
from mco_py.obs.http_security import BasicAuth, TLSServer, TLSServerConfig, WebSecurity
from mco_py.obs.metrics import serve_metrics
from tests.analyzer.certs import Issued, TestCA

HASH = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()


@pytest.fixture
def issued(tmp_path: Path) -> tuple[TestCA, Issued]:
    pki = tmp_path / "pki"
    pki.mkdir()
    ca = TestCA(pki)
    return ca, ca.issue("collector-metrics", "node-1", ["localhost"], server=True, ips=["127.0.0.1"])


@pytest.fixture
def servers() -> Iterator[list[RunningServer]]:
    started: list[RunningServer] = []
    yield started
    for server in started:
        server.stop()


def _probe(tmp_path: Path, servers: list[RunningServer], security: WebSecurity, web_yaml: str) -> list[PartView]:
    registry = CollectorRegistry()
    Counter("mco_test_total", "t", registry=registry).inc()
    server = serve_metrics(registry, host="127.0.0.1", port=0, security=security)
    servers.append(server)
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "collector.yaml").write_text(
        f"metricsHost: 127.0.0.1\nmetricsPort: {server.port}\nstream: {{enabled: false}}\nmetricsWeb:\n{web_yaml}"
    )
    views, problems, _ = probe_host(etc, timeout=5)
    assert problems == []
    return list(views)


def test_a_tls_metrics_port_is_read_over_https(
    tmp_path: Path, issued: tuple[TestCA, Issued], servers: list[RunningServer]
) -> None:
    _, cert = issued
    tls = TLSServer(TLSServerConfig(cert.cert, cert.key))
    (view,) = _probe(
        tmp_path, servers, WebSecurity(tls=tls), f"  tls: {{certFile: {cert.cert}, keyFile: {cert.key}}}\n"
    )
    assert view.metrics is not None
    assert "mco_test_total 1.0" in view.metrics


def test_ports_that_ask_for_credentials_are_a_warning_naming_why(
    tmp_path: Path, issued: tuple[TestCA, Issued], servers: list[RunningServer]
) -> None:
    ca, cert = issued
    (view,) = _probe(
        tmp_path,
        servers,
        WebSecurity(auth=BasicAuth({"prometheus": HASH})),
        f"  basicAuthUsers: {{prometheus: '{HASH}'}}\n",
    )
    assert view.metrics_protected == "it asks for basic auth (basicAuthUsers), mco doctor has no password"
    check = next(c for c in judge([view]) if c.name == "collector metrics")
    assert check.verdict is Verdict.WARN
    assert check.detail.startswith(f"/metrics on port {view.port} not read: it asks for basic auth")

    config = TLSServerConfig(cert.cert, cert.key, client_auth_type="RequireAndVerifyClientCert", client_ca_file=ca.path)
    (tmp_path / "etc").rename(tmp_path / "etc-basic")
    (view,) = _probe(
        tmp_path,
        servers,
        WebSecurity(tls=TLSServer(config)),
        f"  tls: {{certFile: {cert.cert}, keyFile: {cert.key}, clientAuthType: RequireAndVerifyClientCert, "
        f"clientCaFile: {ca.path}}}\n",
    )
    assert "asks for a client certificate" in view.metrics_protected
