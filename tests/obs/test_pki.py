"""The signing CA of a control host: what it signs, what it refuses, and the renewal schedule."""

from __future__ import annotations

import datetime
import random
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from mco_py.errors import ConfigError
from mco_py.obs.pki import (
    BadRequest,
    Signer,
    SigningRefused,
    finish_interrupted,
    install_pair,
    key_pem,
    load_chain,
    new_key,
    signing_request,
    verify_renewed,
)
from mco_py.obs.renewal import CertRenewer, RenewalError, pending_key_path
from tests.analyzer.certs import TestCA

UTC = datetime.UTC


@pytest.fixture
def pki(tmp_path: Path) -> tuple[TestCA, Signer]:
    ca = TestCA(tmp_path)
    inter = ca.intermediate("signer")
    return ca, Signer(inter.cert, inter.key, term=3600)


def peer_of(ca: TestCA, name: str, *, server: bool = False, **kw: datetime.datetime) -> x509.Certificate:
    issued = ca.issue(f"peer-{name}-{server}", name, [name], server=server, **kw)  # type: ignore[arg-type]
    return load_chain(issued.cert.read_bytes())[0]


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def test_a_collectors_request_is_signed_for_its_own_identity_and_chains_to_the_root(
    pki: tuple[TestCA, Signer], tmp_path: Path
) -> None:
    ca, signer = pki
    peer = peer_of(ca, "node-1")
    key = new_key()
    chain = signer.sign_request(signing_request(peer, key), pem(peer))
    certs = load_chain(chain)
    leaf = certs[0]
    assert len(certs) == 2
    assert certs[1].subject == signer.load().cert.subject
    assert leaf.subject == peer.subject
    assert leaf.public_key() == key.public_key()
    assert list(leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value) == [x509.DNSName("node-1")]
    assert ExtendedKeyUsageOID.CLIENT_AUTH in leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    lifetime = leaf.not_valid_after_utc - leaf.not_valid_before_utc
    assert datetime.timedelta(hours=1) <= lifetime <= datetime.timedelta(hours=1, minutes=1)
    verify_renewed(chain, key, peer, ca.path.read_bytes(), at=time.time())  # raises when it does not
    # OpenSSL, as the services' TLS uses it, agrees: leaf -> signing CA -> the root of the trust bundle
    (tmp_path / "leaf.pem").write_bytes(pem(leaf))
    (tmp_path / "inter.pem").write_bytes(pem(certs[1]))
    argv = ["openssl", "verify", "-CAfile", str(ca.path), "-untrusted", str(tmp_path / "inter.pem")]
    done = subprocess.run(
        [*argv, "-purpose", "sslclient", str(tmp_path / "leaf.pem")], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_request_for_another_name_is_refused(pki: tuple[TestCA, Signer]) -> None:
    ca, signer = pki
    caller, other = peer_of(ca, "node-1"), peer_of(ca, "node-2")
    with pytest.raises(SigningRefused, match="a host renews only its own certificate"):
        signer.sign_request(signing_request(other, new_key()), pem(caller))
    # same subject, another name
    builder = x509.CertificateSigningRequestBuilder().subject_name(caller.subject)
    builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName("node-2")]), critical=False)
    from cryptography.hazmat.primitives import hashes

    request = builder.sign(new_key(), hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    with pytest.raises(SigningRefused, match="subject alternative names differ"):
        signer.sign_request(request, pem(caller))


def test_a_server_certificate_cannot_renew_as_a_client(pki: tuple[TestCA, Signer]) -> None:
    ca, signer = pki
    server = peer_of(ca, "ctl-1", server=True)
    with pytest.raises(SigningRefused, match="not a client certificate"):
        signer.sign_request(signing_request(server, new_key()), pem(server))


def test_an_expired_or_not_yet_valid_caller_is_refused(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    inter = ca.intermediate("signer")
    now = datetime.datetime.now(UTC)
    peer = peer_of(
        ca, "node-1", not_before=now - datetime.timedelta(hours=2), not_after=now - datetime.timedelta(hours=1)
    )
    signer = Signer(inter.cert, inter.key, term=3600)
    with pytest.raises(SigningRefused, match="not valid now"):
        signer.sign_request(signing_request(peer, new_key()), pem(peer))
    later = Signer(inter.cert, inter.key, term=3600, clock=lambda: time.time() + 2 * 86400)
    fresh = peer_of(ca, "node-3")
    with pytest.raises(SigningRefused, match="not valid now"):
        later.sign_request(signing_request(fresh, new_key()), pem(fresh))


def test_a_malformed_request_or_no_client_certificate_is_refused(pki: tuple[TestCA, Signer]) -> None:
    ca, signer = pki
    peer = peer_of(ca, "node-1")
    with pytest.raises(BadRequest, match="not a PEM certificate signing request"):
        signer.sign_request(b"hello", pem(peer))
    with pytest.raises(SigningRefused, match="no client certificate"):
        signer.sign_request(signing_request(peer, new_key()), b"")


def test_the_leaf_never_outlives_the_signing_ca(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    inter = ca.intermediate("signer", days=0.75)
    signer = Signer(inter.cert, inter.key, term=86400)
    peer = peer_of(ca, "node-1")
    leaf = load_chain(signer.sign_request(signing_request(peer, new_key()), pem(peer)))[0]
    assert leaf.not_valid_after_utc <= signer.load().cert.not_valid_after_utc


def test_a_signer_must_be_a_ca_with_its_key(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    leaf = ca.issue("leaf", "node-1", ["node-1"], server=False)
    with pytest.raises(ConfigError, match="not a CA"):
        Signer(leaf.cert, leaf.key)
    inter = ca.intermediate("signer")
    with pytest.raises(ConfigError, match="not the certificate's key"):
        Signer(inter.cert, leaf.key)
    with pytest.raises(ConfigError, match="cannot read"):
        Signer(tmp_path / "missing.pem", inter.key)


def test_an_answer_from_another_ca_or_for_another_key_is_not_installed(
    pki: tuple[TestCA, Signer], tmp_path: Path
) -> None:
    ca, signer = pki
    peer = peer_of(ca, "node-1")
    key = new_key()
    chain = signer.sign_request(signing_request(peer, key), pem(peer))
    (tmp_path / "other").mkdir()
    other = TestCA(tmp_path / "other", name="another-ca")
    with pytest.raises(RenewalError, match="does not chain"):
        verify_renewed(chain, key, peer, other.path.read_bytes(), at=time.time())
    with pytest.raises(RenewalError, match="not for the key"):
        verify_renewed(chain, new_key(), peer, ca.path.read_bytes(), at=time.time())


def test_a_server_certificate_is_reissued_in_place_with_a_new_key(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    inter = ca.intermediate("signer")
    issued = ca.issue("server", "ctl-1", ["localhost"], server=True, ips=["127.0.0.1"])
    before = load_chain(issued.cert.read_bytes())[0]
    old_key = issued.key.read_bytes()
    Signer(inter.cert, inter.key, term=600).reissue(issued.cert, issued.key)
    after = load_chain(issued.cert.read_bytes())
    assert after[0].subject == before.subject
    assert after[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value == (
        before.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    )
    assert ExtendedKeyUsageOID.SERVER_AUTH in after[0].extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert issued.key.read_bytes() != old_key
    assert stat.S_IMODE(issued.key.stat().st_mode) == 0o600
    key = serialization.load_pem_private_key(issued.key.read_bytes(), password=None)
    assert key.public_key() == after[0].public_key()
    assert not pending_key_path(issued.key).exists()


def test_a_renewal_cut_between_its_renames_is_finished_at_start(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    inter = ca.intermediate("signer")
    issued = ca.issue("client", "node-1", ["node-1"], server=False)
    signer = Signer(inter.cert, inter.key, term=3600)
    peer = load_chain(issued.cert.read_bytes())[0]
    fresh = new_key()
    chain = signer.sign_request(signing_request(peer, fresh), pem(peer))
    pending_key_path(issued.key).write_bytes(key_pem(fresh))  # as install_pair leaves it after the 2nd rename
    issued.cert.write_bytes(chain)
    assert finish_interrupted(issued.cert, issued.key)
    assert issued.key.read_bytes() == key_pem(fresh)
    # a stale pending key (its certificate never installed) is dropped, the pair left alone
    pending_key_path(issued.key).write_bytes(key_pem(new_key()))
    assert not finish_interrupted(issued.cert, issued.key)
    assert issued.key.read_bytes() == key_pem(fresh)
    assert not pending_key_path(issued.key).exists()


def test_renewal_is_due_at_two_thirds_of_the_lifetime_jittered_earlier() -> None:
    renewer = CertRenewer("c", Path("/nonexistent"), lambda: None, rng=random.Random(1))
    dues = [renewer.due(1000.0 + n, 1000.0 + n + 300.0) - n for n in range(200)]  # 200 certificates
    assert all(1000 + 300 * (0.67 - 0.05) <= due <= 1000 + 300 * 0.67 for due in dues)
    assert max(dues) - min(dues) > 5  # hosts do not renew in step
    # one certificate keeps its draw however often it is asked (the loop asks at every poll)
    assert len({renewer.due(5000.0, 5300.0) for _ in range(50)}) == 1


def test_hosts_polling_a_year_long_certificate_renew_spread_over_the_documented_window(tmp_path: Path) -> None:
    day = 86400.0
    start = datetime.datetime(2026, 1, 1, tzinfo=UTC)
    issued = TestCA(tmp_path).issue(
        "client", "node-1", ["node-1"], server=False, not_before=start, not_after=start + datetime.timedelta(days=365)
    )
    fired: list[float] = []
    for host in range(60):
        ticks = iter(range(10**6))
        now = [0.0]

        def clock(ticks: object = ticks, now: list[float] = now) -> float:
            now[0] = start.timestamp() + next(ticks) * day / 4  # a quarter day passes at each look at the clock
            return now[0]

        done = threading.Event()

        def renew(now: list[float] = now, done: threading.Event = done) -> None:
            if not done.is_set():
                fired.append((now[0] - start.timestamp()) / day)
                done.set()

        renewer = CertRenewer("c", issued.cert, renew, clock=clock, rng=random.Random(host), poll=0.0).start()
        try:
            assert done.wait(30)
        finally:
            renewer.stop()
    # documented: at 0.67 of the lifetime, up to 0.05 of it earlier at random (226.3 to 244.6 days)
    assert all(365 * 0.62 - 0.5 <= when <= 365 * 0.67 + 0.5 for when in fired), sorted(fired)
    assert max(fired) - min(fired) > 12, sorted(fired)  # spread, not all at the first early draw
    assert 231 <= sum(fired) / len(fired) <= 240, sorted(fired)


def test_retries_back_off_from_a_minute_to_an_hour_or_a_share_of_a_short_lifetime() -> None:
    renewer = CertRenewer("c", Path("/nonexistent"), lambda: None, rng=random.Random(1))
    year = 365 * 86400.0
    assert 30 <= renewer.backoff(year, 1) <= 60
    assert 60 <= renewer.backoff(year, 2) <= 120
    assert all(1800 <= renewer.backoff(year, n) <= 3600 for n in (7, 20, 100))
    assert 0.25 <= renewer.backoff(30.0, 1) <= 0.5  # a 30-second test certificate
    assert all(renewer.backoff(30.0, n) <= 3.0 for n in range(1, 40))


def test_a_failed_renewal_is_retried_and_counted_until_it_succeeds(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    now = datetime.datetime.now(UTC)
    issued = ca.issue(
        "client", "node-1", ["node-1"], server=False, not_before=now - datetime.timedelta(seconds=20),
        not_after=now + datetime.timedelta(seconds=10),
    )  # fmt: skip
    results: list[str] = []
    attempts = []
    done = threading.Event()

    def renew() -> None:
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise RenewalError("no analyzer answered")
        fresh = ca.issue("fresh", "node-1", ["node-1"], server=False)
        install_pair(
            issued.cert,
            issued.key,
            fresh.cert.read_bytes(),
            serialization.load_pem_private_key(fresh.key.read_bytes(), None),
        )  # type: ignore[arg-type]
        done.set()

    renewer = CertRenewer("grpc_certificate", issued.cert, renew, on_result=results.append, poll=0.2).start()
    try:
        assert done.wait(15)
        time.sleep(0.5)  # the new certificate (a day) is not due again
    finally:
        renewer.stop()
    assert results == ["error", "error", "renewed"]
    assert attempts[1] - attempts[0] >= 0.2  # backed off, not spinning
    assert (
        load_chain(issued.cert.read_bytes())[0].subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "node-1"
    )


def test_a_signing_ca_near_its_expiry_refuses_rather_than_issue_ever_shorter_certificates(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    inter = ca.intermediate("signer", days=100 / 86400)  # 100 seconds left
    peer = peer_of(ca, "node-1")
    request = signing_request(peer, new_key())
    # a renewal's term of 900 s: 100 s left is more than a tenth of it, so it signs (cut at the CA's expiry)
    chain = Signer(inter.cert, inter.key, term=900).sign_request(request, pem(peer))
    assert load_chain(chain)[0].not_valid_after_utc <= load_chain(inter.cert.read_bytes())[0].not_valid_after_utc
    # a term of 1,200 s: less than a tenth of it is left; refused (the caller backs off), naming the fix
    with pytest.raises(SigningRefused, match=r"less than a tenth of a renewal's term.*rerun playbooks/mco\.yml"):
        Signer(inter.cert, inter.key, term=1200).sign_request(request, pem(peer))


def test_doctor_warns_about_a_signing_ca_before_it_refuses_renewals() -> None:
    """With the roles' terms (mco_pki_signer_days, mco_pki_cert_days), the signing CA's expiry warning comes
    before its first refusal, and a run reissues it (a third of its term left) before either."""
    from mco_py.doctor.checks import warn_before
    from mco_py.obs.credentials import Validity
    from mco_py.obs.pki import DEFAULT_TERM, MIN_TERM_SHARE

    defaults = yaml.safe_load((Path(__file__).parents[2] / "roles/mco_pki/defaults/main.yml").read_text())
    signer_lifetime = defaults["mco_pki_signer_days"] * 86400.0
    assert defaults["mco_pki_cert_days"] * 86400.0 == DEFAULT_TERM
    refuses_from = MIN_TERM_SHARE * DEFAULT_TERM  # seconds left on the signing CA
    warns_from = warn_before(Validity(0.0, signer_lifetime))
    assert signer_lifetime / 3 > warns_from > refuses_from + 30 * 86400


def test_the_analyzer_watches_its_signing_cas_expiry() -> None:
    from mco_py.config.analyzer import AnalyzerSettings, credential_files

    settings = AnalyzerSettings(
        tls_cert="/c/server.pem", tls_key="/c/server-key.pem", tls_ca="/c/ca.pem",
        tls_signer_cert="/c/signer.pem", tls_signer_key="/c/signer-key.pem",
    )  # fmt: skip
    files = {f.name: f for f in credential_files(settings)}
    assert files["signing_ca"].path == Path("/c/signer.pem")
    assert files["signing_ca"].kind == "certificate"


def test_an_unexpected_error_in_a_renewal_is_logged_counted_and_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ca = TestCA(tmp_path)
    now = datetime.datetime.now(UTC)
    issued = ca.issue(
        "client", "node-1", ["node-1"], server=False, not_before=now - datetime.timedelta(seconds=20),
        not_after=now + datetime.timedelta(seconds=10),
    )  # fmt: skip
    results: list[str] = []
    attempts: list[float] = []
    done = threading.Event()

    def renew() -> None:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            raise ValueError("a bug in the renewal")  # none of the expected failures
        fresh = ca.issue("fresh", "node-1", ["node-1"], server=False)
        install_pair(
            issued.cert,
            issued.key,
            fresh.cert.read_bytes(),
            serialization.load_pem_private_key(fresh.key.read_bytes(), None),
        )  # type: ignore[arg-type]
        done.set()

    renewer = CertRenewer("grpc_certificate", issued.cert, renew, on_result=results.append, poll=0.2).start()
    try:
        assert done.wait(15), results  # the thread lived on and tried again
    finally:
        renewer.stop()
    assert results == ["error", "renewed"]
    assert attempts[1] - attempts[0] >= 0.2  # backed off
    assert any("a bug in the renewal" in r.getMessage() or r.exc_info for r in caplog.records)
