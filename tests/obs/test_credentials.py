"""Credential expiry: certificates (notAfter), JWT tokens (exp), kubeconfigs, and the gauges re-read on change."""

from __future__ import annotations

import base64
import datetime
import json
import math
import os
import shutil
from pathlib import Path

import pytest
from cryptography import x509
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from mco_py.obs.credentials import (
    CredentialError,
    CredentialExpiry,
    CredentialFile,
    pem_validities,
    read_validity,
    token_validity,
)
from tests.analyzer.certs import TestCA

UTC = datetime.UTC


def jwt(claims: dict[str, object]) -> str:
    """An unsigned JWT with ``claims`` (the parser reads, never verifies)."""

    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def kubeconfig(user: dict[str, object]) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
            "users": [{"name": "other", "user": {"token": "not-a-jwt"}}, {"name": "mco", "user": user}],
            "contexts": [{"name": "mco", "context": {"cluster": "c", "user": "mco"}}],
            "current-context": "mco",
        }
    )


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("ca"))


#: UTCTime covers 1950-2049; GeneralizedTime from 2050 (RFC 5280 4.1.2.5): both sides of the switch.
instants = st.datetimes(
    min_value=datetime.datetime(1951, 1, 1), max_value=datetime.datetime(2200, 1, 1), timezones=st.just(UTC)
).map(lambda moment: moment.replace(microsecond=0))


@settings(max_examples=25, deadline=None)
@given(start=instants, length=st.integers(min_value=1, max_value=200 * 365 * 86400))
def test_a_certificates_term_is_read_as_x509_reads_it(ca: TestCA, start: datetime.datetime, length: int) -> None:
    end = start + datetime.timedelta(seconds=length)
    issued = ca.issue("leaf", "n1", ["n1"], server=True, not_before=start, not_after=end)
    pem = issued.cert.read_bytes()
    cert = x509.load_pem_x509_certificate(pem)
    [validity] = pem_validities(pem)
    assert validity.not_before == cert.not_valid_before_utc.timestamp() == start.timestamp()
    assert validity.not_after == cert.not_valid_after_utc.timestamp() == end.timestamp()


def test_a_bundle_counts_its_earliest_certificate_and_a_leaf_its_first(ca: TestCA, tmp_path: Path) -> None:
    soon = datetime.datetime(2031, 5, 1, tzinfo=UTC)
    late = datetime.datetime(2040, 5, 1, tzinfo=UTC)
    first = ca.issue("a", "a", ["a"], server=True, not_after=late).cert.read_bytes()
    second = ca.issue("b", "b", ["b"], server=True, not_after=soon).cert.read_bytes()
    path = tmp_path / "bundle.pem"
    path.write_bytes(first + b"\n" + second)
    assert read_validity("bundle", path).not_after == soon.timestamp()
    assert read_validity("certificate", path).not_after == late.timestamp()


def test_a_tokens_term_is_its_iat_and_exp(tmp_path: Path) -> None:
    validity = token_validity(jwt({"iat": 1000, "exp": 1000 + 3600, "sub": "system:serviceaccount:mco-system:x"}))
    assert (validity.not_before, validity.not_after, validity.lifetime) == (1000.0, 4600.0, 3600.0)
    assert math.isnan(token_validity(jwt({"exp": 5})).not_before)
    path = tmp_path / "token"
    path.write_text(jwt({"iat": 1, "exp": 2}) + "\n")
    assert read_validity("token", path).not_after == 2.0


def test_a_kubeconfig_is_read_through_its_current_contexts_user(ca: TestCA, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig({"token": jwt({"iat": 10, "exp": 20})}))
    assert read_validity("kubeconfig", path).not_after == 20.0
    (tmp_path / "sa.token").write_text(jwt({"iat": 10, "exp": 30}))
    path.write_text(kubeconfig({"tokenFile": "sa.token"}))
    assert read_validity("kubeconfig", path).not_after == 30.0
    end = datetime.datetime(2033, 1, 2, 3, 4, 5, tzinfo=UTC)
    pem = ca.issue("user", "user", [], server=False, not_after=end).cert.read_bytes()
    path.write_text(kubeconfig({"client-certificate-data": base64.b64encode(pem).decode()}))
    assert read_validity("kubeconfig", path).not_after == end.timestamp()


@pytest.mark.parametrize(
    ("kind", "content", "says"),
    [
        ("token", "opaque-shared-secret", "not a JWT"),
        ("token", jwt({"iat": 1}), "no numeric 'exp'"),
        ("token", "a.!!!.c", "not base64url JSON"),
        ("certificate", "hello", "no PEM certificate"),
        ("bundle", "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n", "certificate 1:"),
        ("kubeconfig", "[1, 2]", "not a kubeconfig"),
        ("kubeconfig", kubeconfig({"exec": {"command": "x"}}), "neither a token nor client-certificate-data"),
    ],
)
def test_a_file_without_a_readable_expiry_says_what_is_wrong(
    tmp_path: Path, kind: str, content: str, says: str
) -> None:
    path = tmp_path / "cred"
    path.write_text(content)
    with pytest.raises(CredentialError, match=says) as caught:
        read_validity(kind, path)  # type: ignore[arg-type]
    assert str(path) in str(caught.value)


def test_a_missing_file_is_named() -> None:
    with pytest.raises(CredentialError, match=r"/nonexistent/ca\.pem: cannot read"):
        read_validity("bundle", Path("/nonexistent/ca.pem"))


def test_the_gauges_follow_a_renewed_file_at_the_next_scrape(ca: TestCA, tmp_path: Path) -> None:
    token = tmp_path / "kubeconfig"
    token.write_text(kubeconfig({"token": jwt({"iat": 100, "exp": 200})}))
    end = datetime.datetime(2030, 1, 1, tzinfo=UTC)
    cert = ca.issue("svc", "svc", ["svc"], server=True, not_after=end).cert
    registry = CollectorRegistry()
    files = [
        CredentialFile("grpc_certificate", "certificate", cert),
        CredentialFile("kubeconfig", "kubeconfig", token),
        CredentialFile("grpc_ca", "bundle", tmp_path / "missing.pem"),
    ]
    CredentialExpiry("analyzer", files, registry=registry)

    def value(name: str, credential: str) -> float | None:
        return registry.get_sample_value(
            f"mco_analyzer_credential_{name}_timestamp_seconds", {"credential": credential}
        )

    assert value("expiry", "grpc_certificate") == end.timestamp()
    assert (value("issued", "kubeconfig"), value("expiry", "kubeconfig")) == (100.0, 200.0)
    assert value("expiry", "grpc_ca") is None  # unreadable: no sample, not a made-up value
    renewed = tmp_path / "kubeconfig.new"
    renewed.write_text(kubeconfig({"token": jwt({"iat": 180, "exp": 280})}))
    os.replace(renewed, token)  # as a renewal writes it: atomically
    assert value("expiry", "kubeconfig") == 280.0
    shutil.copy(ca.path, tmp_path / "missing.pem")
    assert value("expiry", "grpc_ca") == ca.cert.not_valid_after_utc.timestamp()
    text = generate_latest(registry).decode()
    assert "# TYPE mco_analyzer_credential_expiry_timestamp_seconds gauge" in text
