"""Host certificates renewed on the hosts, without the CA key leaving the controller.

The controller (role mco_pki) gives each control host a *signing CA*: an intermediate of the MCO
CA (pathlen 0, keyCertSign), its key readable by the mco user only. With it the analyzer signs

* a collector's renewal (:meth:`Signer.sign_request`): the collector makes a new key (it never
  leaves the host) and a signing request, and sends it over its mutually authenticated stream
  connection; the analyzer signs it only for exactly the subject and names of the client
  certificate that authenticated the call, and only while that certificate is valid;
* its own server certificates (:meth:`Signer.reissue`): the same subject, names and usage, a new key.

A renewed certificate file holds the leaf and then the signing CA (the chain a peer needs: every
host trusts only the root, from the trust bundle). ``CertRenewer`` renews one certificate at
a fraction of its lifetime (:mod:`mco_py.obs.renewal`); the services' TLS reloaders pick the new
files up for new connections.
"""

from __future__ import annotations

import datetime
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from mco_py.errors import ConfigError, MCOError
from mco_py.obs.files import Stamp, file_stamps
from mco_py.obs.renewal import DEFAULT_RENEW_AT, CertRenewer, RenewalError, pending_key_path

log = logging.getLogger(__name__)

#: Default term of a certificate a signing CA issues, seconds (the controller's mco_pki_cert_days).
DEFAULT_TERM = 365 * 86400.0
#: A signing CA issues only while at least this share of ``term`` is left before its own expiry
#: (it refuses, and callers back off, rather than issue ever shorter certificates renewed ever sooner).
#: A tenth: mco doctor and the expiry alert warn about the signing CA (a tenth of its own, longer,
#: lifetime) before it starts refusing.
MIN_TERM_SHARE = 0.1


class SigningRefused(MCOError):
    """The signer will not sign this request for this caller; the message says why (sent to the caller)."""


class BadRequest(SigningRefused):
    """The signing request itself is malformed (not a PEM CSR, bad signature, unsupported key)."""


def new_key() -> ec.EllipticCurvePrivateKey:
    """A fresh P-256 key, as mco_pki makes them."""
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def load_chain(pem: bytes) -> list[x509.Certificate]:
    """Every certificate of a PEM file (leaf first). Raises ValueError when there is none."""
    return x509.load_pem_x509_certificates(pem)


def _names(cert: x509.Certificate | x509.CertificateSigningRequest) -> frozenset[x509.GeneralName]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return frozenset()
    return frozenset(san)


def _usages(cert: x509.Certificate) -> tuple[x509.ObjectIdentifier, ...]:
    try:
        return tuple(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        return ()


def signing_request(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> bytes:
    """A PEM CSR for ``key`` with the subject and subject alternative names of ``cert``."""
    builder = x509.CertificateSigningRequestBuilder().subject_name(cert.subject)
    names = _names(cert)
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(sorted(names, key=str)), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def install(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` beside ``path`` with ``mode``, flushed, then rename it over ``path`` (atomic)."""
    tmp = path.with_name(f".{path.name}.renew")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp.replace(path)


def install_pair(cert: Path, key: Path, chain: bytes, new: ec.EllipticCurvePrivateKey) -> None:
    """Install a renewed certificate and its key. The key is written first to ``<key>.next``, the
    certificate renamed over the old one, then the key: :func:`finish_interrupted` completes a
    renewal a crash cut between the two renames. In the moment between them the files do not match,
    and the services' reloaders keep the last good pair."""
    pending = pending_key_path(key)
    install(pending, key_pem(new), 0o600)
    install(cert, chain, 0o644)
    pending.replace(key)


def finish_interrupted(cert: Path, key: Path) -> bool:
    """When ``<key>.next`` holds the key of ``cert`` (a renewal stopped before its last rename),
    move it over ``key``; True when it did. A stale ``.next`` (its certificate never installed) is removed."""
    pending = pending_key_path(key)
    if not pending.exists():
        return False
    try:
        leaf = load_chain(cert.read_bytes())[0]
        candidate = serialization.load_pem_private_key(pending.read_bytes(), password=None)
        matches = candidate.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        ) == leaf.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    except (OSError, ValueError, TypeError, UnsupportedAlgorithm):
        matches = False
    if matches:
        pending.replace(key)
        log.info("finished an interrupted renewal of %s: its new key is in place", cert)
        return True
    pending.unlink(missing_ok=True)
    return False


def _when(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC)


@dataclass(frozen=True, slots=True)
class _Loaded:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    pem: bytes


class Signer:
    """The signing CA of a control host (certificate and key files, read again when they change).

    ``term`` is the lifetime of what it issues, seconds (never past the signing CA's own expiry). With
    less than :data:`MIN_TERM_SHARE` of a term left on the signing CA it refuses to issue.
    """

    def __init__(self, cert: Path, key: Path, *, term: float = DEFAULT_TERM, clock: Callable[[], float] = time.time):
        self.cert_path, self.key_path = cert, key
        self.term = term
        self.clock = clock
        self._lock = threading.Lock()
        self._seen: tuple[Stamp, ...] | None = None
        self._loaded: _Loaded | None = None
        self.load()  # a bad signing CA at start is the operator's to fix: ConfigError

    def load(self) -> _Loaded:
        """The signing CA as its files are now (re-read when they changed)."""
        with self._lock:
            seen = file_stamps((self.cert_path, self.key_path))
            if seen == self._seen and self._loaded is not None:
                return self._loaded
            self._loaded, self._seen = self._read(), seen
            return self._loaded

    def _read(self) -> _Loaded:
        where = f"signing CA {self.cert_path}, {self.key_path}"
        try:
            pem = self.cert_path.read_bytes()
            key = serialization.load_pem_private_key(self.key_path.read_bytes(), password=None)
            cert = load_chain(pem)[0]
        except OSError as exc:
            raise ConfigError(f"{where}: cannot read {exc.filename}: {exc.strerror}; check tlsSignerCert/Key") from exc
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
            raise ConfigError(f"{where}: not a PEM certificate and its unencrypted key ({exc})") from exc
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ConfigError(f"{where}: the key is not an EC key (mco_pki makes P-256 keys)")
        try:
            constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
        except x509.ExtensionNotFound:
            constraints = x509.BasicConstraints(ca=False, path_length=None)
        if not constraints.ca:
            raise ConfigError(f"{where}: the certificate is not a CA; give the signing CA mco_pki issued")
        if cert.public_key() != key.public_key():
            raise ConfigError(f"{where}: the key is not the certificate's key")
        return _Loaded(cert, key, b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [cert]))

    def issue(
        self,
        subject: x509.Name,
        names: frozenset[x509.GeneralName],
        usages: tuple[x509.ObjectIdentifier, ...],
        public_key: ec.EllipticCurvePublicKey,
    ) -> bytes:
        """A leaf for ``public_key`` with this subject, names and extended key usage; PEM leaf + signing CA."""
        try:
            ca = self.load()
        except ConfigError as exc:
            raise SigningRefused(f"this analyzer cannot sign now: {exc}") from exc
        now = self.clock()
        if now >= ca.cert.not_valid_after_utc.timestamp():
            raise SigningRefused(f"this analyzer's signing CA {self.cert_path} expired; rerun playbooks/mco.yml")
        ca_end = ca.cert.not_valid_after_utc.timestamp()
        if ca_end - now < self.term * MIN_TERM_SHARE:
            # each renewal would be shorter than the last (cut at the CA's expiry), renewed again ever sooner
            raise SigningRefused(
                f"this analyzer's signing CA {self.cert_path} expires {ca.cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ},"
                f" in less than a tenth of a renewal's term ({self.term:.0f} s); rerun playbooks/mco.yml (it reissues"
                " the signing CA when a third of its term is left)"
            )
        skew = min(60.0, self.term / 10)  # another host's clock may lag a little
        not_after = min(now + self.term, ca_end)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca.cert.subject)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(_when(now - skew))
            .not_valid_after(_when(not_after))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
        )
        if usages:
            builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(sorted(names, key=str)), critical=False)
        leaf = builder.sign(ca.key, hashes.SHA256())
        return leaf.public_bytes(serialization.Encoding.PEM) + ca.pem

    def sign_request(self, csr_pem: bytes, peer_pem: bytes) -> bytes:
        """Sign a collector's renewal: ``csr_pem`` from the caller whose (already verified) client
        certificate is ``peer_pem``. Refused unless that certificate is a valid client certificate
        now and the request asks for exactly its subject and names."""
        try:
            peer = load_chain(peer_pem)[0]
        except ValueError as exc:
            raise SigningRefused("the call carries no client certificate; renewal needs mTLS") from exc
        now = self.clock()
        if not peer.not_valid_before_utc.timestamp() <= now < peer.not_valid_after_utc.timestamp():
            raise SigningRefused(
                f"the client certificate is not valid now (valid {peer.not_valid_before_utc:%Y-%m-%dT%H:%M:%SZ} to "
                f"{peer.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}); an expired certificate is reissued by the "
                "controller (playbooks/mco.yml), not renewed"
            )
        usages = _usages(peer)
        if ExtendedKeyUsageOID.CLIENT_AUTH not in usages:
            raise SigningRefused("the certificate that authenticated the call is not a client certificate (clientAuth)")
        try:
            csr = x509.load_pem_x509_csr(csr_pem)
            public_key = csr.public_key()
            valid = csr.is_signature_valid
        except (ValueError, UnsupportedAlgorithm, InvalidSignature) as exc:
            raise BadRequest(f"not a PEM certificate signing request: {exc}") from exc
        if not valid:
            raise BadRequest("the signing request's signature does not verify")
        if not isinstance(public_key, ec.EllipticCurvePublicKey) or public_key.curve.key_size < 256:
            raise BadRequest("the signing request's key is not an EC key of 256 bits or more")
        if csr.subject != peer.subject:
            raise SigningRefused(
                f"the request is for {csr.subject.rfc4514_string()!r}, the caller is "
                f"{peer.subject.rfc4514_string()!r}; a host renews only its own certificate"
            )
        if _names(csr) != _names(peer):
            raise SigningRefused(
                "the request's subject alternative names differ from the caller's certificate's; "
                "a host renews only its own names (new names come from the controller)"
            )
        return self.issue(peer.subject, _names(peer), usages, public_key)

    def reissue(self, cert: Path, key: Path) -> None:
        """Renew a certificate of this host (same subject, names and usage) with a new key, in place."""
        try:
            current = load_chain(cert.read_bytes())[0]
        except (OSError, ValueError) as exc:
            raise RenewalError(f"{cert}: cannot read the certificate to renew: {exc}") from exc
        fresh = new_key()
        try:
            chain = self.issue(current.subject, _names(current), _usages(current), fresh.public_key())
        except SigningRefused as exc:
            raise RenewalError(str(exc)) from exc
        install_pair(cert, key, chain, fresh)


def chains_to(certs: list[x509.Certificate], roots: list[x509.Certificate], *, at: float) -> bool:
    """True when ``certs`` (leaf first, each issued by the next) ends at one of ``roots`` and every
    certificate of it is valid at ``at``. Signatures and validity only: OpenSSL and gRPC check the rest."""
    chain = list(certs)
    while True:
        cert = chain[0]
        if not cert.not_valid_before_utc.timestamp() <= at < cert.not_valid_after_utc.timestamp():
            return False
        for root in roots:
            try:
                cert.verify_directly_issued_by(root)
            except (ValueError, TypeError, InvalidSignature):
                continue
            return root.not_valid_before_utc.timestamp() <= at < root.not_valid_after_utc.timestamp()
        if len(chain) < 2:
            return False
        try:
            cert.verify_directly_issued_by(chain[1])
        except (ValueError, TypeError, InvalidSignature):
            return False
        chain = chain[1:]


def verify_renewed(
    chain: bytes, key: ec.EllipticCurvePrivateKey, current: x509.Certificate, trust: bytes, *, at: float
) -> None:
    """Check a renewal's answer before installing it: for ``key``, with ``current``'s subject and
    names, and chaining to a root of the trust bundle ``trust``. Raises RenewalError naming what is wrong."""
    try:
        certs = load_chain(chain)
        roots = load_chain(trust)
    except ValueError as exc:
        raise RenewalError(f"the renewed certificate or the trust bundle is not PEM: {exc}") from exc
    leaf = certs[0]
    if leaf.public_key() != key.public_key():
        raise RenewalError("the renewed certificate is not for the key this host made")
    if leaf.subject != current.subject or _names(leaf) != _names(current):
        raise RenewalError("the renewed certificate names another subject than the current one")
    if not chains_to(certs, roots, at=at):
        raise RenewalError("the renewed certificate does not chain to the trust bundle, or is not valid now")


def renew_own(
    signer: Signer,
    pairs: Sequence[tuple[str, Path, Path]],
    *,
    renew_at: float = DEFAULT_RENEW_AT,
    on_result: Callable[[str, str], None] | None = None,
) -> list[CertRenewer]:
    """Started renewers of this host's own certificates: each ``(credential name, certificate, key)``
    reissued with ``signer`` (a renewal a crash cut short is finished first); ``on_result`` hears the
    name and ``renewed`` or ``error``."""
    out = []
    for name, cert, key in pairs:
        finish_interrupted(cert, key)
        out.append(
            CertRenewer(
                name,
                cert,
                functools.partial(signer.reissue, cert, key),
                renew_at=renew_at,
                on_result=functools.partial(on_result, name) if on_result is not None else None,
            ).start()
        )
    return out
