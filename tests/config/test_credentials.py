"""Each service names every certificate and token it loads for the expiry gauges and doctor, the
HTTPS port's certificate and client CA included."""

from __future__ import annotations

import typing

import pytest

from mco_py.config import analyzer, collector, extender
from mco_py.config.loader import Spec, load, parse_document

WEB = (
    "tls: {certFile: /etc/mco/pki/web.pem, keyFile: /etc/mco/pki/web-key.pem,"
    " clientAuthType: RequireAndVerifyClientCert, clientCaFile: /etc/mco/pki/clients.pem}"
)


def names(
    spec: Spec[typing.Any], text: str, credential_files: typing.Callable[[typing.Any], list[typing.Any]]
) -> dict[str, str]:
    settings = load(spec, document=parse_document(text, "x.yaml"), source="x.yaml").settings
    return {c.name: str(c.path) for c in credential_files(settings)}


@pytest.mark.parametrize(
    ("spec", "credential_files", "text", "prefix"),
    [
        (collector.SPEC, collector.credential_files, f"stream: {{enabled: false}}\nmetricsWeb: {{{WEB}}}\n", "metrics"),
        (analyzer.SPEC, analyzer.credential_files, f"metricsWeb: {{{WEB}}}\n", "metrics"),
        (extender.SPEC, extender.credential_files, f"web: {{{WEB}}}\n", "web"),
    ],
)  # fmt: skip
def test_the_https_port_certificate_and_client_ca_are_credentials(
    spec: Spec[typing.Any], credential_files: typing.Any, text: str, prefix: str
) -> None:
    got = names(spec, text, credential_files)
    assert got[f"{prefix}_certificate"] == "/etc/mco/pki/web.pem"
    assert got[f"{prefix}_client_ca"] == "/etc/mco/pki/clients.pem"


def test_a_plain_port_adds_none() -> None:
    assert names(extender.SPEC, "mode: standalone\n", extender.credential_files) == {}
