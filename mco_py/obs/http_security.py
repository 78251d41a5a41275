"""TLS and basic authentication of an MCO HTTP port, as Prometheus' exporter-toolkit offers them
(``tls_server_config``, ``basic_auth_users`` with bcrypt hashes).

:class:`TLSServer` holds the server's :class:`ssl.SSLContext` and reloads the certificate and key
when their files change (a renewal needs no restart). :class:`BasicAuth` checks an
``Authorization`` header against bcrypt hashes. A bcrypt check costs tens of milliseconds of the
event loop on purpose, so a stranger must not be able to buy them at will: a header that passed
once is remembered (at most :data:`CACHE_SIZE`, and only headers that passed, so a stranger cannot
evict a scheduler's), and new headers get at most ``checks_per_second`` bcrypt checks, counted apart
for headers naming a configured user and for the others (so a stranger guessing names cannot lock
out a scraper's new password); beyond that they are answered 429 without one. A password longer than
bcrypt's 72 bytes matches no hash: it is answered 401 without a check. Nothing is logged per request
(the server counts refusals).
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import secrets
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from mco_py.errors import ConfigError
from mco_py.obs.files import Stamp, file_stamps

log = logging.getLogger(__name__)

#: exporter-toolkit's ``client_auth_type`` values that verify what they accept, as Python's modes.
#: ``RequestClientCert`` and ``RequireAnyClientCert`` accept unverified certificates: refused.
CLIENT_AUTH_TYPES = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
TLS_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
RELOAD_INTERVAL = 10.0
"""Seconds between looks at the certificate and key files' modification times."""
CACHE_SIZE = 64
"""``Authorization`` headers remembered as valid (the schedulers and Prometheus send one each)."""
CHECKS_PER_SECOND = 2.0
"""bcrypt checks a second for new headers naming a configured user, and as many for the others."""
MAX_PASSWORD = 72
"""bcrypt reads at most this many bytes of a password (bcrypt 5 refuses longer ones)."""


class TLSFileError(ConfigError):
    """A TLS file is missing, unreadable or not what it should be; ``field`` names which."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class TLSServerConfig:
    """exporter-toolkit's ``tls_server_config`` (the files, not inline PEM)."""

    cert_file: Path
    key_file: Path
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    min_version: str = "TLS12"


def _read(field: str, path: Path, marker: bytes, what: str) -> None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TLSFileError(field, f"{path} does not exist; give the path of the {what} (PEM)") from None
    except PermissionError:
        raise TLSFileError(
            field, f"{path} is not readable by this service (uid {os.getuid()}); make it readable by its user"
        ) from None
    except OSError as exc:
        raise TLSFileError(field, f"{path}: cannot read: {exc.strerror or exc}") from exc
    if marker not in data:
        raise TLSFileError(field, f"{path} holds no PEM {what} (no '-----BEGIN ...{marker.decode()}' line)")


def server_context(config: TLSServerConfig) -> ssl.SSLContext:
    """A server context for ``config``; :class:`TLSFileError` (naming the field) when a file is wrong."""
    mode = CLIENT_AUTH_TYPES.get(config.client_auth_type)
    if mode is None:
        raise TLSFileError(
            "clientAuthType",
            f"{config.client_auth_type!r} is not supported; use one of {', '.join(CLIENT_AUTH_TYPES)} "
            "(RequestClientCert and RequireAnyClientCert accept unverified certificates)",
        )
    version = TLS_VERSIONS.get(config.min_version)
    if version is None:
        raise TLSFileError("minVersion", f"{config.min_version!r} is not one of {', '.join(TLS_VERSIONS)}")
    if mode != ssl.CERT_NONE and config.client_ca_file is None:
        raise TLSFileError(
            "clientCaFile", f"clientAuthType {config.client_auth_type} needs clientCaFile (the CA of the clients)"
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = version
    _load_pair(ctx, config)
    if config.client_ca_file is not None:
        _read("clientCaFile", config.client_ca_file, b"CERTIFICATE", "CA certificate")
        try:
            ctx.load_verify_locations(cafile=str(config.client_ca_file))
        except ssl.SSLError as exc:
            raise TLSFileError("clientCaFile", f"{config.client_ca_file}: not a usable CA bundle: {exc}") from exc
    ctx.verify_mode = mode
    return ctx


def _load_pair(ctx: ssl.SSLContext, config: TLSServerConfig) -> None:
    _read("certFile", config.cert_file, b"CERTIFICATE", "server certificate")
    _read("keyFile", config.key_file, b"PRIVATE KEY", "private key")
    try:
        ctx.load_cert_chain(str(config.cert_file), str(config.key_file))
    except ssl.SSLError as exc:
        raise TLSFileError(
            "keyFile", f"{config.key_file} is not the key of {config.cert_file} (or not PEM): {exc.reason or exc}"
        ) from exc


class TLSServer:
    """The TLS of a port. :attr:`context` is the one the server listens with; each handshake is switched (its
    ``sni_callback``, called for every ClientHello, named or not) to the newest context that loaded whole.
    :meth:`refresh` (called per accepted connection) builds a fresh context at most every
    :data:`RELOAD_INTERVAL` seconds when the certificate, key or client CA bundle changed, and switches to it
    only when it loads: a certificate renewed before its key keeps the old pair served until the key follows."""

    def __init__(self, config: TLSServerConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.context = server_context(config)
        self.current = self.context
        """The context new handshakes use (:attr:`context` until a reload)."""
        self.context.sni_callback = self._switch
        self.reloads = 0
        self._clock = clock
        self._next_look = clock() + RELOAD_INTERVAL
        self._stamp = self._stamps()

    def _switch(self, ssl_object: ssl.SSLObject, _server_name: str | None, _context: ssl.SSLContext) -> None:
        if self.current is not self.context:
            ssl_object.context = self.current

    def _stamps(self) -> tuple[Stamp, ...]:
        return file_stamps((self.config.cert_file, self.config.key_file, self.config.client_ca_file))

    def refresh(self) -> None:
        now = self._clock()
        if now < self._next_look:
            return
        self._next_look = now + RELOAD_INTERVAL
        stamp = self._stamps()
        if stamp == self._stamp:
            return
        try:
            fresh = server_context(self.config)
        except ConfigError as exc:  # half-written during a renewal: keep serving the last good files, look again
            log.warning("TLS certificate not reloaded (the last good one is served): %s", exc)
            return
        self.current = fresh
        self._stamp = stamp
        self.reloads += 1
        log.info("TLS certificate reloaded", extra={"certFile": str(self.config.cert_file)})


class Verdict(Enum):
    ALLOWED = 200
    DENIED = 401
    THROTTLED = 429


def is_bcrypt_hash(text: str) -> bool:
    return len(text) == 60 and text[:4] in ("$2a$", "$2b$", "$2y$") and text[4:6].isdigit() and text[6] == "$"


def _credentials(header: bytes) -> tuple[bytes, bytes] | None:
    """(user, password) of a ``Basic`` header; None when it is not one."""
    scheme, _, encoded = header.partition(b" ")
    if scheme.lower() != b"basic" or not encoded:
        return None
    try:
        user, sep, password = base64.b64decode(encoded.strip(), validate=True).partition(b":")
    except (binascii.Error, ValueError):
        return None
    return (user, password) if sep else None


class BasicAuth:
    """``Authorization: Basic`` checked against ``users`` (name → bcrypt hash)."""

    def __init__(
        self,
        users: Mapping[str, str],
        *,
        checks_per_second: float = CHECKS_PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not users:
            raise ConfigError("no users: give at least one name and bcrypt hash")
        self._users: dict[bytes, bytes] = {}
        for name, hashed in users.items():
            if not name or ":" in name:
                raise ConfigError(f"{name!r}: a user name is not empty and has no ':'")
            if not is_bcrypt_hash(hashed):
                raise ConfigError(
                    f"{name}: not a bcrypt hash ($2y$10$... , 60 characters); make one with "
                    "`htpasswd -nBC 10 \"\" | tr -d ':\\n'`"
                )
            self._users[name.encode()] = hashed.encode()
        # An unknown name is checked against a hash of the same cost, so timing does not tell names apart.
        rounds = int(next(iter(self._users.values()))[4:6])
        import bcrypt  # noqa: PLC0415 - only a port with basic auth needs it (not every collector)

        self._checkpw = bcrypt.checkpw
        self._decoy = bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt(rounds=rounds))
        self._valid: dict[bytes, None] = {}
        self._known = _Budget(checks_per_second, clock)
        """Checks of headers naming a configured user."""
        self._unknown = _Budget(checks_per_second, clock)
        """Checks of the others (their own budget: a stranger's guesses at names do not spend the users')."""
        self.checks = 0
        """bcrypt checks made (a cached header costs none)."""

    def check(self, header: bytes) -> Verdict:
        """The verdict on one request's ``Authorization`` header value (empty: none sent)."""
        if header in self._valid:
            return Verdict.ALLOWED
        credentials = _credentials(header)
        if credentials is None:
            return Verdict.DENIED
        user, password = credentials
        if len(password) > MAX_PASSWORD:
            return Verdict.DENIED  # no hash matches it (and bcrypt would raise): no check spent
        hashed = self._users.get(user)
        if not (self._known if hashed is not None else self._unknown).take():
            return Verdict.THROTTLED
        self.checks += 1
        ok = self._checkpw(password, hashed if hashed is not None else self._decoy)  # constant-time compare inside
        if not ok or hashed is None:
            return Verdict.DENIED
        if len(self._valid) >= CACHE_SIZE:
            del self._valid[next(iter(self._valid))]
        self._valid[bytes(header)] = None
        return Verdict.ALLOWED


class _Budget:
    """A token bucket: ``rate`` tokens a second, at most ``rate`` saved."""

    def __init__(self, rate: float, clock: Callable[[], float]) -> None:
        self._rate = rate
        self._tokens = rate
        self._clock = clock
        self._last = clock()

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self._rate, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True


@dataclass(frozen=True, slots=True)
class WebSecurity:
    """What a port asks of its clients: TLS (optionally client certificates) and basic auth; both optional."""

    tls: TLSServer | None = None
    auth: BasicAuth | None = None

    @property
    def insecure(self) -> bool:
        """Nothing is asked of the clients."""
        return self.tls is None and self.auth is None

    @property
    def log_level(self) -> int:
        """Warning when :attr:`insecure`, so that it stands out in the start-up log."""
        return logging.WARNING if self.insecure else logging.INFO

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    def describe(self) -> str:
        """One phrase for the start-up log (loud when nothing is asked)."""
        if self.insecure:
            return "INSECURE: plain HTTP, no authentication"
        parts = []
        if self.tls is not None:
            parts.append(f"TLS (client certificates: {self.tls.config.client_auth_type})")
        else:
            parts.append("plain HTTP (passwords travel in clear text)")
        parts.append("basic auth" if self.auth is not None else "no basic auth")
        return ", ".join(parts)
