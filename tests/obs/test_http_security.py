"""TLS and basic auth of MCO's HTTP ports (mco_py/obs/http_security.py): real servers on port 0, real clients."""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry, Counter

from mco_py.config import analyzer, collector, extender
from mco_py.config.loader import load
from mco_py.errors import ConfigError
from mco_py.obs.http import RunningServer, ServerOptions, start_in_thread
from mco_py.obs.http_app import Limits, Request, Response
from mco_py.obs.http_security import BasicAuth, TLSServer, TLSServerConfig, Verdict, WebSecurity
from mco_py.obs.metrics import serve_metrics
from tests.analyzer.certs import Issued, TestCA
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = b"s3cret-scrape"
HASH = bcrypt.hashpw(PASSWORD, bcrypt.gensalt(rounds=4)).decode()


def _basic(user: str, password: bytes) -> str:
    return "Basic " + base64.b64encode(user.encode() + b":" + password).decode()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Issued | TestCA]:
    directory = tmp_path_factory.mktemp("pki")
    ca = TestCA(directory)
    other_dir = directory / "other"
    other_dir.mkdir()
    other = TestCA(other_dir)
    return {
        "ca": ca,
        "server": ca.issue("server", "mco-metrics", ["localhost"], server=True, ips=["127.0.0.1"]),
        "client": ca.issue("prometheus", "prometheus", [], server=False),
        "stranger": other.issue("stranger", "prometheus", [], server=False),
    }


def _ca(pki: dict[str, Issued | TestCA]) -> TestCA:
    ca = pki["ca"]
    assert isinstance(ca, TestCA)
    return ca


def _issued(pki: dict[str, Issued | TestCA], name: str) -> Issued:
    issued = pki[name]
    assert isinstance(issued, Issued)
    return issued


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("mco_test_events_total", "events", registry=registry).inc(3)
    return registry


def _tls(pki: dict[str, Issued | TestCA], client_auth: str = "NoClientCert") -> TLSServer:
    server = _issued(pki, "server")
    return TLSServer(
        TLSServerConfig(
            server.cert,
            server.key,
            client_auth_type=client_auth,
            client_ca_file=_ca(pki).path if client_auth != "NoClientCert" else None,
        )
    )


def _client_context(pki: dict[str, Issued | TestCA], cert: Issued | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(_ca(pki).path))
    if cert is not None:
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
    return ctx


def _get(
    port: int, *, context: ssl.SSLContext | None = None, headers: dict[str, str] | None = None, method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    conn: http.client.HTTPConnection
    if context is not None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, "/metrics", headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


@pytest.fixture
def servers() -> Iterator[list[RunningServer]]:
    started: list[RunningServer] = []
    yield started
    for server in started:
        server.stop()


def _serve(servers: list[RunningServer], security: WebSecurity) -> int:
    server = serve_metrics(_registry(), host="127.0.0.1", port=0, security=security)
    servers.append(server)
    return server.port


# --- TLS -------------------------------------------------------------------------------------------


def test_tls_port_serves_https_and_refuses_plain_http(
    pki: dict[str, Issued | TestCA], servers: list[RunningServer]
) -> None:
    port = _serve(servers, WebSecurity(tls=_tls(pki)))
    status, _, body = _get(port, context=_client_context(pki))
    assert status == 200
    assert b"mco_test_events_total 3.0" in body
    with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
        _get(port)  # plain HTTP to a TLS port gets no reply


def test_client_certificate_required_and_verified(
    pki: dict[str, Issued | TestCA], servers: list[RunningServer]
) -> None:
    port = _serve(servers, WebSecurity(tls=_tls(pki, "RequireAndVerifyClientCert")))
    status, _, _ = _get(port, context=_client_context(pki, _issued(pki, "client")))
    assert status == 200
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _get(port, context=_client_context(pki))  # no certificate
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _get(port, context=_client_context(pki, _issued(pki, "stranger")))  # signed by another CA
    # the refused handshakes cost nothing lasting: the port still serves
    assert _get(port, context=_client_context(pki, _issued(pki, "client")))[0] == 200


def test_a_renewed_certificate_is_served_without_a_restart(tmp_path: Path, pki: dict[str, Issued | TestCA]) -> None:
    ca = _ca(pki)
    first = ca.issue("renewed", "mco-metrics", ["localhost"], server=True, ips=["127.0.0.1"])
    now = [0.0]
    tls = TLSServer(TLSServerConfig(first.cert, first.key), clock=lambda: now[0])
    server = serve_metrics(_registry(), host="127.0.0.1", port=0, security=WebSecurity(tls=tls))
    try:

        def served_serial() -> int:
            with (
                socket.create_connection(("127.0.0.1", server.port), timeout=30) as raw,
                _client_context(pki).wrap_socket(raw, server_hostname="localhost") as sock,
            ):
                der = sock.getpeercert(binary_form=True)
            assert der is not None
            return int(x509.load_der_x509_certificate(der).serial_number)

        before = served_serial()
        second = ca.issue("renewed-next", "mco-metrics", ["localhost"], server=True, ips=["127.0.0.1"])
        os.replace(second.cert, first.cert)
        os.replace(second.key, first.key)
        stamp = time.time() + 5  # a distinct modification time, whatever the file system's resolution
        os.utime(first.cert, (stamp, stamp))
        os.utime(first.key, (stamp, stamp))
        assert served_serial() == before  # looked at no more than every RELOAD_INTERVAL
        now[0] = 11.0
        assert served_serial() != before
        assert tls.reloads == 1
    finally:
        server.stop()


def _served_serial(port: int, context: ssl.SSLContext, server_hostname: str) -> int:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=30) as raw,
        context.wrap_socket(raw, server_hostname=server_hostname) as sock,
    ):
        der = sock.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def _serial(issued: Issued) -> int:
    return int(x509.load_pem_x509_certificate(issued.cert.read_bytes()).serial_number)


def _touch(*paths: Path) -> None:
    stamp = time.time() + 5 + len(paths) * 0.01  # a distinct modification time, whatever the file system's resolution
    for path in paths:
        os.utime(path, (stamp, stamp))


@pytest.mark.parametrize("server_hostname", ["localhost", "127.0.0.1"], ids=["sni", "no-sni"])
def test_a_certificate_renewed_before_its_key_keeps_the_old_pair_served(
    tmp_path: Path, pki: dict[str, Issued | TestCA], server_hostname: str
) -> None:
    ca = _ca(pki)
    first = ca.issue(f"live-{server_hostname}", "mco-metrics", ["localhost"], server=True, ips=["127.0.0.1"])
    now = [0.0]
    tls = TLSServer(TLSServerConfig(first.cert, first.key), clock=lambda: now[0])
    server = serve_metrics(_registry(), host="127.0.0.1", port=0, security=WebSecurity(tls=tls))
    context = _client_context(pki)
    try:
        assert _served_serial(server.port, context, server_hostname) == _serial(first)
        second = ca.issue(f"next-{server_hostname}", "mco-metrics", ["localhost"], server=True, ips=["127.0.0.1"])
        expected = _serial(second)
        os.replace(second.cert, first.cert)  # the certificate lands first; its key is not there yet
        _touch(first.cert)
        now[0] = 11.0
        assert _served_serial(server.port, context, server_hostname) != expected  # the old pair, whole
        assert tls.reloads == 0
        os.replace(second.key, first.key)
        _touch(first.key)
        now[0] = 22.0
        assert _served_serial(server.port, context, server_hostname) == expected
        assert tls.reloads == 1
        assert _get(server.port, context=context)[0] == 200
    finally:
        server.stop()


def test_a_rotated_client_ca_bundle_is_used_without_a_restart(tmp_path: Path, pki: dict[str, Issued | TestCA]) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old_ca, new_ca = TestCA(tmp_path / "old"), TestCA(tmp_path / "new", name="mco-next-ca")
    old_client = old_ca.issue("old-client", "prometheus", [], server=False)
    new_client = new_ca.issue("new-client", "prometheus", [], server=False)
    bundle = tmp_path / "clients-ca.pem"
    bundle.write_bytes(old_ca.path.read_bytes())
    server_pair = _issued(pki, "server")
    now = [0.0]
    tls = TLSServer(
        TLSServerConfig(
            server_pair.cert, server_pair.key, client_auth_type="RequireAndVerifyClientCert", client_ca_file=bundle
        ),
        clock=lambda: now[0],
    )
    server = serve_metrics(_registry(), host="127.0.0.1", port=0, security=WebSecurity(tls=tls))
    try:
        assert _get(server.port, context=_client_context(pki, old_client))[0] == 200
        with pytest.raises((ssl.SSLError, ConnectionError)):
            _get(server.port, context=_client_context(pki, new_client))
        bundle.write_bytes(old_ca.path.read_bytes() + new_ca.path.read_bytes())  # the rotation's overlap
        _touch(bundle)
        now[0] = 11.0
        assert _get(server.port, context=_client_context(pki, new_client))[0] == 200
        assert _get(server.port, context=_client_context(pki, old_client))[0] == 200
        assert tls.reloads == 1
    finally:
        server.stop()


@pytest.mark.parametrize("use_uvloop", [True, False], ids=["uvloop", "asyncio"])
def test_tls_handshakes_in_progress_count_against_max_connections(
    pki: dict[str, Issued | TestCA], use_uvloop: bool
) -> None:
    """A connection counts from its accept: strangers that never finish (or break off) a handshake hold at
    most maxConnections, make room for a client like idle connections do, and are closed at the head's
    deadline, counted by reason."""
    limits = Limits(max_connections=4, header_timeout=1.0, sweep_interval=0.05)
    options = ServerOptions(limits=limits, security=WebSecurity(tls=_tls(pki)))
    server = start_in_thread(_Recorder(), options=options, use_uvloop=use_uvloop)
    silent: list[socket.socket] = []
    try:
        for _ in range(12):  # three times the cap, none sends a ClientHello
            silent.append(socket.create_connection(("127.0.0.1", server.port), timeout=10))
        wait_until(lambda: server.guard.closed.get("evicted", 0) >= 8, "the oldest handshakes to make room", 10)
        assert len(server.guard.open) == 4
        # a client still gets in: the oldest unfinished handshake makes room for it
        assert _get(server.port, context=_client_context(pki))[0] == 200
        # the rest are closed at the head's deadline
        wait_until(lambda: not server.guard.open, "the unfinished handshakes to be closed", 10)
        assert server.guard.closed.get("handshake-timeout", 0) >= 1
        # a broken-off handshake leaves at once, counted
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as garbage:
            garbage.sendall(b"GET / HTTP/1.1\r\n\r\n")
            garbage.settimeout(10)
            with contextlib.suppress(ConnectionError):
                while garbage.recv(4096):
                    pass
        wait_until(lambda: server.guard.closed.get("handshake-failed", 0) == 1, "the failed handshake counted", 10)
        assert not server.guard.open
    finally:
        for sock in silent:
            sock.close()
        server.stop()


# --- basic auth ----------------------------------------------------------------------------------


def test_basic_auth_401_without_or_with_a_wrong_password_200_with_the_right_one(
    servers: list[RunningServer],
) -> None:
    auth = BasicAuth({"prometheus": HASH})
    server = serve_metrics(_registry(), host="127.0.0.1", port=0, security=WebSecurity(auth=auth))
    servers.append(server)
    status, headers, _ = _get(server.port)
    assert status == 401
    assert headers["WWW-Authenticate"].startswith("Basic")
    assert _get(server.port, headers={"Authorization": _basic("prometheus", b"wrong")})[0] == 401
    assert _get(server.port, headers={"Authorization": _basic("nobody", PASSWORD)})[0] == 401
    assert _get(server.port, headers={"Authorization": "Bearer abc"})[0] == 401
    status, _, body = _get(server.port, headers={"Authorization": _basic("prometheus", PASSWORD)})
    assert status == 200
    assert b"mco_test_events_total" in body
    assert server.guard.closed.get("unauthorized") == 4
    checks = auth.checks
    for _ in range(5):  # the scraper's header is remembered: no bcrypt per scrape
        assert _get(server.port, headers={"Authorization": _basic("prometheus", PASSWORD)})[0] == 200
    assert auth.checks == checks


def test_basic_auth_over_tls_with_a_client_certificate(
    pki: dict[str, Issued | TestCA], servers: list[RunningServer]
) -> None:
    port = _serve(servers, WebSecurity(tls=_tls(pki, "RequireAndVerifyClientCert"), auth=BasicAuth({"p": HASH})))
    context = _client_context(pki, _issued(pki, "client"))
    assert _get(port, context=context)[0] == 401
    assert _get(port, context=context, headers={"Authorization": _basic("p", PASSWORD)})[0] == 200


def test_a_stranger_buys_at_most_the_bcrypt_budget() -> None:
    now = [100.0]
    auth = BasicAuth({"prometheus": HASH}, checks_per_second=2.0, clock=lambda: now[0])
    verdicts = [auth.check(_basic("prometheus", f"guess-{i}".encode()).encode()) for i in range(10)]
    assert verdicts.count(Verdict.DENIED) == 2
    assert verdicts.count(Verdict.THROTTLED) == 8
    assert auth.checks == 2
    now[0] += 1.0  # the budget refills
    assert auth.check(_basic("prometheus", PASSWORD).encode()) is Verdict.ALLOWED
    # once allowed, the header is remembered: allowed even with the budget spent
    assert auth.check(_basic("prometheus", b"x").encode()) is Verdict.DENIED
    assert auth.check(_basic("prometheus", b"y").encode()) is Verdict.THROTTLED
    assert auth.check(_basic("prometheus", PASSWORD).encode()) is Verdict.ALLOWED
    # malformed headers cost no bcrypt at all
    for bad in (b"", b"Basic", b"Basic !!!", b"Basic " + base64.b64encode(b"no-colon"), b"Digest abc"):
        assert auth.check(bad) is Verdict.DENIED
    assert auth.checks == 4  # the two budgeted ones, the right password, "x"


def test_the_default_budget_is_two_checks_a_second_for_users_and_two_for_strangers() -> None:
    now = [100.0]
    auth = BasicAuth({"prometheus": HASH}, clock=lambda: now[0])
    guesses = [auth.check(_basic("prometheus", f"guess-{i}".encode()).encode()) for i in range(10)]
    assert (guesses.count(Verdict.DENIED), guesses.count(Verdict.THROTTLED)) == (2, 8)
    strangers = [auth.check(_basic(f"nobody-{i}", b"x").encode()) for i in range(10)]
    assert (strangers.count(Verdict.DENIED), strangers.count(Verdict.THROTTLED)) == (2, 8)
    assert auth.checks == 4
    now[0] += 0.5  # half a second: one check for each
    assert auth.check(_basic("nobody", b"y").encode()) is Verdict.DENIED
    assert auth.check(_basic("nobody", b"z").encode()) is Verdict.THROTTLED
    assert auth.check(_basic("prometheus", PASSWORD).encode()) is Verdict.ALLOWED


def test_strangers_guessing_names_do_not_lock_out_a_users_new_password() -> None:
    now = [100.0]
    auth = BasicAuth({"prometheus": HASH}, clock=lambda: now[0])
    for i in range(50):  # a stranger floods unknown names: its budget is spent, not the users'
        auth.check(_basic(f"guess-{i}", b"x").encode())
    assert auth.check(_basic("prometheus", PASSWORD).encode()) is Verdict.ALLOWED


@pytest.mark.parametrize("user", ["prometheus", "nobody"])
def test_a_password_longer_than_72_bytes_is_a_wrong_password_costing_no_check(
    servers: list[RunningServer], user: str
) -> None:
    auth = BasicAuth({"prometheus": HASH}, clock=lambda: 0.0)
    server = serve_metrics(_registry(), host="127.0.0.1", port=0, security=WebSecurity(auth=auth))
    servers.append(server)
    for size in (73, 200):
        status, headers, body = _get(server.port, headers={"Authorization": _basic(user, PASSWORD + b"x" * size)})
        assert (status, headers["WWW-Authenticate"][:5]) == (401, "Basic"), body
    assert auth.checks == 0
    assert server.guard.closed == {"unauthorized": 2}
    # the budget is whole: the right password still gets its check now
    assert _get(server.port, headers={"Authorization": _basic("prometheus", PASSWORD)})[0] == 200


class _Recorder:
    def __init__(self) -> None:
        self.requests: list[Request] = []

    def handle(self, request: Request) -> Response:
        self.requests.append(request)
        return Response(200, "text/plain", b"ok\n")


def test_unauthenticated_requests_never_reach_the_app_nor_buffer_their_body() -> None:
    app = _Recorder()
    server = start_in_thread(app, options=ServerOptions(security=WebSecurity(auth=BasicAuth({"volcano": HASH}))))
    try:
        body = b"x" * (4 * 1024 * 1024)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("POST", "/volcano/v1.9/predicate", body=body)
        response = conn.getresponse()
        assert response.status == 401
        assert response.getheader("Connection") == "close"
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("POST", "/p", body=b"{}", headers={"Authorization": _basic("volcano", PASSWORD)})
        assert conn.getresponse().status == 200
        conn.close()
        assert [r.path for r in app.requests] == ["/p"]
    finally:
        server.stop()


def test_throttled_credentials_get_429_through_the_server() -> None:
    auth = BasicAuth({"volcano": HASH}, checks_per_second=1.0, clock=lambda: 0.0)
    server = start_in_thread(_Recorder(), options=ServerOptions(security=WebSecurity(auth=auth)))
    try:
        statuses = []
        for i in range(3):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            conn.request("GET", "/", headers={"Authorization": _basic("volcano", f"guess-{i}".encode())})
            response = conn.getresponse()
            statuses.append((response.status, response.getheader("Retry-After")))
            conn.close()
        assert statuses == [(401, None), (429, "1"), (429, "1")]
        assert server.guard.closed == {"unauthorized": 1, "auth-throttled": 2}
    finally:
        server.stop()


# --- bad configuration gets a clear error --------------------------------------------------------


def _web_error(spec_doc: dict[str, object], tmp_path: Path) -> str:
    loaded = load(extender.SPEC, document={"web": spec_doc}, env={})
    with pytest.raises(ConfigError) as caught:
        loaded.settings.web.security("web")
    return str(caught.value)


def test_missing_certificate_file_is_named(tmp_path: Path, pki: dict[str, Issued | TestCA]) -> None:
    message = _web_error(
        {"tls": {"certFile": str(tmp_path / "nope.pem"), "keyFile": str(_issued(pki, "server").key)}}, tmp_path
    )
    assert (
        message
        == f"web.tls.certFile: {tmp_path / 'nope.pem'} does not exist; give the path of the server certificate (PEM)"
    )


def test_unreadable_or_wrong_key_is_named(tmp_path: Path, pki: dict[str, Issued | TestCA]) -> None:
    server = _issued(pki, "server")
    (tmp_path / "dir-key.pem").mkdir()
    message = _web_error({"tls": {"certFile": str(server.cert), "keyFile": str(tmp_path / "dir-key.pem")}}, tmp_path)
    assert message.startswith(f"web.tls.keyFile: {tmp_path / 'dir-key.pem'}: cannot read: ")
    garbage = tmp_path / "garbage-key.pem"
    garbage.write_text("not a key\n")
    message = _web_error({"tls": {"certFile": str(server.cert), "keyFile": str(garbage)}}, tmp_path)
    assert message == f"web.tls.keyFile: {garbage} holds no PEM private key (no '-----BEGIN ...PRIVATE KEY' line)"
    other = _issued(pki, "client")  # a real key, but not the certificate's
    message = _web_error({"tls": {"certFile": str(server.cert), "keyFile": str(other.key)}}, tmp_path)
    assert message.startswith(f"web.tls.keyFile: {other.key} is not the key of {server.cert}")


@pytest.mark.parametrize("value", ["RequireAnyClientCert", "requireandverifyclientcert", "mTLS"])
def test_unknown_client_auth_type_is_refused_with_the_choices(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(extender.SPEC, document={"web": {"tls": {"clientAuthType": value}}}, env={})
    assert str(caught.value) == (
        f"config: web.tls.clientAuthType: expected one of NoClientCert, VerifyClientCertIfGiven, "
        f"RequireAndVerifyClientCert, got {value!r}"
    )


@pytest.mark.parametrize(
    ("spec", "prefix"), [(collector.SPEC, "metricsWeb"), (analyzer.SPEC, "metricsWeb"), (extender.SPEC, "web")]
)
def test_combinations_and_hashes_checked_for_every_port(spec: object, prefix: str) -> None:
    doc = {
        prefix: {
            "tls": {"certFile": "/etc/mco/pki/x.pem", "clientAuthType": "RequireAndVerifyClientCert"},
            "basicAuthUsers": {"prometheus": "plaintext-password"},
        }
    }
    extra = {"stream": {"enabled": False}} if spec is collector.SPEC else {}
    with pytest.raises(ConfigError) as caught:
        load(spec, document={**doc, **extra}, env={})  # type: ignore[call-overload]
    lines = str(caught.value).splitlines()[1:]
    assert lines == [
        f"config: {prefix}.tls.certFile: certFile and keyFile go together (the server's pair)",
        f"config: {prefix}.tls.clientCaFile: clientAuthType RequireAndVerifyClientCert needs clientCaFile",
        f"config: {prefix}.basicAuthUsers.prometheus: not a bcrypt hash ($2y$10$..., 60 characters); make one with "
        "`htpasswd -nBC 10 \"\" | tr -d ':\\n'`",
    ]


def test_extender_exits_2_naming_the_bad_file(tmp_path: Path) -> None:
    config = tmp_path / "extender.yaml"
    config.write_text(
        f"listen: 127.0.0.1:0\nreportFile: {tmp_path / 'r.json'}\n"
        f"web:\n  tls:\n    certFile: {tmp_path / 'missing.pem'}\n    keyFile: {tmp_path / 'missing-key.pem'}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mco_py.cli", "extender", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"mco extender: web.tls.certFile: {tmp_path / 'missing.pem'} does not exist" in done.stderr


def _extender_says(tmp_path: Path, web: str, wanted: str) -> str:
    """The stderr line of a real ``mco extender`` (settings + ``web``) that contains ``wanted``."""
    config = tmp_path / "extender.yaml"
    config.write_text(f"listen: 127.0.0.1:0\nreportFile: {tmp_path / 'r.json'}\n{web}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mco_py.cli", "extender", "--config", str(config)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, "the extender exited early"
            if wanted in line:
                return line
        raise AssertionError(f"no line with {wanted!r} within 60 s")
    finally:
        proc.terminate()
        proc.wait(30)
        if proc.stderr is not None:
            proc.stderr.close()


def test_the_extender_says_insecure_while_its_port_asks_for_nothing(
    tmp_path: Path, pki: dict[str, Issued | TestCA]
) -> None:
    line = _extender_says(tmp_path, "", "INSECURE")
    assert '"level": "warning"' in line
    assert "set web.tls and/or web.basicAuthUsers" in line
    server = _issued(pki, "server")
    web = f"web:\n  tls: {{certFile: {server.cert}, keyFile: {server.key}}}\n  basicAuthUsers: {{volcano: '{HASH}'}}\n"
    line = _extender_says(tmp_path, web, "extender port:")
    assert "TLS (client certificates: NoClientCert), basic auth" in line
