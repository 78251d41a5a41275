"""When the credentials a service loads expire: certificates (notAfter), bearer tokens (JWT ``exp``).

:func:`read_validity` reads one file as the service reads it; :class:`CredentialExpiry` exposes
every credential's term as two gauges, re-read whenever the file changes (stat on each scrape:
a renewed certificate or token shows at the next scrape, with no restart and no thread).

Certificates are read with a minimal DER walk (the ``validity`` of ``tbsCertificate``), so the
collector's nodes need no X.509 library for it.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import json
import logging
import math
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from mco_py.errors import ConfigError
from mco_py.obs.files import file_stamp

log = logging.getLogger(__name__)

#: ``certificate``: the first certificate of a PEM file (a leaf and its chain); ``bundle``: every
#: certificate of a trust bundle, the earliest to expire counting; ``token``: a JWT bearer token
#: file; ``kubeconfig``: the token (or client certificate) of its current context's user.
Kind = Literal["certificate", "bundle", "token", "kubeconfig"]

_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\s*(.+?)\s*-----END CERTIFICATE-----", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Validity:
    """One credential's term, in seconds since the epoch (UTC)."""

    not_before: float
    """Certificate notBefore, token ``iat`` (NaN when the token has none)."""
    not_after: float
    """Certificate notAfter, token ``exp``."""

    @property
    def lifetime(self) -> float:
        """Seconds from issue to expiry (NaN when the issue time is not known)."""
        return self.not_after - self.not_before


class CredentialError(ConfigError):
    """A credential file cannot be read or has no expiry MCO can read; the message says which and why."""


def _tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of the value, end of the value) of the DER element at ``pos``."""
    if pos + 2 > len(data):
        raise ValueError("truncated DER element")
    tag, length = data[pos], data[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or pos + count > len(data):
            raise ValueError("bad DER length")
        length = int.from_bytes(data[pos : pos + count], "big")
        pos += count
    if pos + length > len(data):
        raise ValueError("DER element runs past its container")
    return tag, pos, pos + length


def _der_time(tag: int, raw: bytes) -> float:
    """UTCTime (YYMMDDHHMMSSZ, years 1950-2049) or GeneralizedTime (YYYYMMDDHHMMSSZ) as epoch seconds."""
    text = raw.decode("ascii")
    if tag == 0x17 and len(text) == 13 and text.endswith("Z"):
        year = int(text[:2])
        text = f"{1900 + year if year >= 50 else 2000 + year}{text[2:]}"
    elif not (tag == 0x18 and len(text) == 15 and text.endswith("Z")):
        raise ValueError(f"certificate time {text!r} is neither UTCTime nor GeneralizedTime in UTC")
    if not text[:14].isdigit():
        raise ValueError(f"certificate time {text!r} is not all digits")
    fields = (int(text[0:4]), int(text[4:6]), int(text[6:8]), int(text[8:10]), int(text[10:12]), int(text[12:14]))
    return float(calendar.timegm((*fields, 0, 0, 0)))


def certificate_validity(der: bytes) -> Validity:
    """notBefore and notAfter of one DER certificate. Raises ValueError when it is not one."""
    tag, start, _ = _tlv(der, 0)  # Certificate
    if tag != 0x30:
        raise ValueError("not a DER certificate (no outer SEQUENCE)")
    tag, pos, _ = _tlv(der, start)  # tbsCertificate
    if tag != 0x30:
        raise ValueError("not a DER certificate (no tbsCertificate)")
    tag, _, end = _tlv(der, pos)
    if tag == 0xA0:  # [0] version
        pos = end
    for _ in range(3):  # serialNumber, signature, issuer
        _, _, pos = _tlv(der, pos)
    tag, pos, _ = _tlv(der, pos)  # validity
    if tag != 0x30:
        raise ValueError("not a DER certificate (no validity)")
    tag, start, end = _tlv(der, pos)
    not_before = _der_time(tag, der[start:end])
    tag, start, end = _tlv(der, end)
    return Validity(not_before, _der_time(tag, der[start:end]))


def pem_validities(pem: bytes) -> list[Validity]:
    """Every certificate of a PEM file, in order. Raises ValueError naming what is wrong."""
    out = []
    for number, match in enumerate(_PEM.finditer(pem), 1):
        try:
            der = base64.b64decode(b"".join(match.group(1).split()), validate=True)
            out.append(certificate_validity(der))
        except (ValueError, binascii.Error) as exc:
            raise ValueError(f"certificate {number}: {exc}") from exc
    if not out:
        raise ValueError("no PEM certificate in it (-----BEGIN CERTIFICATE-----)")
    return out


def token_claims(token: str) -> dict[str, object]:
    """The claims of a JWT (its signature is the API server's business, not checked here)."""
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise ValueError("not a JWT (three dot-separated parts); a token without an expiry cannot be watched")
    try:
        payload = parts[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, binascii.Error) as exc:
        raise ValueError(f"the JWT's payload is not base64url JSON: {exc}") from exc
    if not isinstance(claims, dict):
        raise ValueError("the JWT's payload is not a JSON object")
    return claims


def token_validity(token: str) -> Validity:
    """``iat`` and ``exp`` of a JWT."""
    claims = token_claims(token)
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise ValueError("the JWT has no numeric 'exp' claim: it never expires or is not a bounded token")
    iat = claims.get("iat")
    return Validity(float(iat) if isinstance(iat, int | float) and not isinstance(iat, bool) else math.nan, float(exp))


def kubeconfig_user(data: bytes) -> Mapping[str, object]:
    """The ``user`` entry of the current context of a kubeconfig document."""
    doc = yaml.safe_load(data)
    if not isinstance(doc, dict):
        raise ValueError("not a kubeconfig (a YAML mapping)")
    users = {u.get("name"): u.get("user") for u in doc.get("users") or [] if isinstance(u, dict)}
    contexts = {c.get("name"): c.get("context") for c in doc.get("contexts") or [] if isinstance(c, dict)}
    context = contexts.get(doc.get("current-context"))
    user = users.get(context.get("user")) if isinstance(context, dict) else None
    if user is None and len(users) == 1:
        user = next(iter(users.values()))
    if not isinstance(user, dict):
        raise ValueError("no user for its current-context")
    return user


def _kubeconfig_validity(path: Path, data: bytes) -> Validity:
    user = kubeconfig_user(data)
    token, token_file = user.get("token"), user.get("tokenFile")
    cert = user.get("client-certificate-data")
    if isinstance(token, str) and token:
        return token_validity(token)
    if isinstance(token_file, str) and token_file:
        return token_validity((path.parent / token_file).read_text(encoding="utf-8"))
    if isinstance(cert, str) and cert:
        return pem_validities(base64.b64decode(cert))[0]
    raise ValueError("its user has neither a token nor client-certificate-data (exec plugins are not watched)")


def read_validity(kind: Kind, path: Path) -> Validity:
    """The term of the credential in ``path`` read as ``kind``. Raises CredentialError saying why not."""
    try:
        data = path.read_bytes()
        if kind == "token":
            return token_validity(data.decode("utf-8"))
        if kind == "kubeconfig":
            return _kubeconfig_validity(path, data)
        found = pem_validities(data)
        return found[0] if kind == "certificate" else min(found, key=lambda v: v.not_after)
    except OSError as exc:
        raise CredentialError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except (ValueError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CredentialError(f"{path}: no {kind} expiry in it: {exc}") from exc


@dataclass(frozen=True, slots=True)
class CredentialFile:
    """A credential a service loads: its label on the gauges, how to read it, where it is."""

    name: str
    kind: Kind
    path: Path


class CredentialExpiry(Collector):
    """``mco_<part>_credential_expiry_timestamp_seconds{credential}`` and ``..._issued_...``.

    Each scrape stats every file and parses again only the ones that changed; a file that cannot
    be read has no sample (its error is logged once per change).
    """

    def __init__(self, part: str, files: list[CredentialFile], *, registry: CollectorRegistry | None = None) -> None:
        self.part = part
        self.files = list(files)
        self._seen: dict[str, tuple[tuple[int, int, int, int], Validity | None]] = {}
        self._renewals: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        if registry is not None:
            registry.register(self)

    def validities(self) -> dict[str, Validity]:
        """Every readable credential's term, re-read where its file changed."""
        out = {}
        with self._lock:
            for item in self.files:
                key = file_stamp(item.path)
                seen = self._seen.get(item.name)
                if seen is None or seen[0] != key:
                    try:
                        seen = (key, read_validity(item.kind, item.path))
                    except CredentialError as exc:
                        log.warning("credential %s: %s", item.name, exc, extra={"credential": item.name})
                        seen = (key, None)
                    self._seen[item.name] = seen
                if seen[1] is not None:
                    out[item.name] = seen[1]
        return out

    def count_renewal(self, name: str, result: str) -> None:
        """One renewal attempt of credential ``name`` by the service itself (``renewed`` or ``error``)."""
        with self._lock:
            self._renewals[name, result] = self._renewals.get((name, result), 0) + 1

    def describe(self) -> Iterator[Metric]:
        return iter(self._families({}))

    def collect(self) -> Iterator[Metric]:
        return iter(self._families(self.validities()))

    def _families(self, found: Mapping[str, Validity]) -> list[Metric]:
        expiry = GaugeMetricFamily(
            f"mco_{self.part}_credential_expiry_timestamp_seconds",
            f"When each credential mco {self.part} loads expires (certificate notAfter, token exp), "
            "re-read when its file changes",
            labels=["credential"],
        )
        issued = GaugeMetricFamily(
            f"mco_{self.part}_credential_issued_timestamp_seconds",
            f"When each credential mco {self.part} loads was issued (certificate notBefore, token iat)",
            labels=["credential"],
        )
        renewals = CounterMetricFamily(
            f"mco_{self.part}_credential_renewals",
            f"Renewals mco {self.part} made of its own credentials, by result (renewed, error)",
            labels=["credential", "result"],
        )
        for name, validity in sorted(found.items()):
            expiry.add_metric([name], validity.not_after)
            if not math.isnan(validity.not_before):
                issued.add_metric([name], validity.not_before)
        with self._lock:
            for (name, result), count in sorted(self._renewals.items()):
                renewals.add_metric([name, result], count)
        return [expiry, issued, renewals]
