"""TLS and basic auth of an HTTP port (the extender's, every ``/metrics``), in the shape of Prometheus'
exporter-toolkit web configuration: ``tls`` is its ``tls_server_config`` (``certFile``, ``keyFile``,
``clientAuthType``, ``clientCaFile``, ``minVersion``), ``basicAuthUsers`` its ``basic_auth_users``
(name → bcrypt hash; file only, never a flag or a variable). Example::

    web:
      tls:
        certFile: /etc/mco/pki/extender.pem
        keyFile: /etc/mco/pki/extender-key.pem
        clientAuthType: RequireAndVerifyClientCert
        clientCaFile: /etc/mco/pki/ca.pem
      basicAuthUsers:
        prometheus: $2b$10$GBZHQ539Jd2UdTQ3ZeEC9eC1unLoAQaKYDJSBdEGcaZqtx6Xoj.NG
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from mco_py.config.loader import Problem, Section
from mco_py.errors import ConfigError
from mco_py.obs.credentials import CredentialFile
from mco_py.obs.http_security import (
    BasicAuth,
    TLSFileError,
    TLSServer,
    TLSServerConfig,
    WebSecurity,
    is_bcrypt_hash,
)

ClientAuthType = Literal["NoClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"]


class TLSSettings(Section, frozen=True):
    """exporter-toolkit's ``tls_server_config``: certFile and keyFile turn TLS on."""

    cert_file: Annotated[Path | None, Meta(description="server certificate (PEM); with keyFile turns TLS on")] = None
    key_file: Annotated[Path | None, Meta(description="server private key (PEM)")] = None
    client_auth_type: Annotated[
        ClientAuthType,
        Meta(description="client certificates: none asked, verified when given, or required and verified"),
    ] = "NoClientCert"
    client_ca_file: Annotated[
        Path | None, Meta(description="CA bundle that verifies client certificates (needs clientAuthType)")
    ] = None
    min_version: Annotated[Literal["TLS12", "TLS13"], Meta(description="oldest TLS version accepted")] = "TLS12"


class WebSettings(Section, frozen=True):
    """TLS and basic auth of one HTTP port (none by default: the start-up log says INSECURE)."""

    tls: TLSSettings = msgspec.field(default_factory=TLSSettings)
    basic_auth_users: Annotated[
        dict[str, str],
        Meta(description="user → bcrypt hash (htpasswd -nBC 10 \"\" | tr -d ':\\n'); empty: no basic auth"),
    ] = msgspec.field(default_factory=dict)

    def problems(self, prefix: str) -> Sequence[Problem]:
        """What is wrong across keys, named under ``prefix`` (``web`` or ``metricsWeb``); files are read later."""
        out: list[Problem] = []
        tls = self.tls
        if (tls.cert_file is None) != (tls.key_file is None):
            out.append(Problem(f"{prefix}.tls.certFile", "certFile and keyFile go together (the server's pair)"))
        if tls.cert_file is None and (tls.client_ca_file is not None or tls.client_auth_type != "NoClientCert"):
            out.append(Problem(f"{prefix}.tls.clientCaFile", "client certificates need TLS: set certFile and keyFile"))
        if tls.client_auth_type != "NoClientCert" and tls.client_ca_file is None:
            out.append(
                Problem(f"{prefix}.tls.clientCaFile", f"clientAuthType {tls.client_auth_type} needs clientCaFile")
            )
        if tls.client_ca_file is not None and tls.client_auth_type == "NoClientCert":
            out.append(
                Problem(
                    f"{prefix}.tls.clientAuthType",
                    "clientCaFile is given but no certificate is asked: use RequireAndVerifyClientCert",
                )
            )
        for name, hashed in self.basic_auth_users.items():
            if not name or ":" in name:
                out.append(Problem(f"{prefix}.basicAuthUsers", f"{name!r}: a user name is not empty and has no ':'"))
            elif not is_bcrypt_hash(hashed):
                out.append(
                    Problem(
                        f"{prefix}.basicAuthUsers.{name}",
                        "not a bcrypt hash ($2y$10$..., 60 characters); make one with "
                        "`htpasswd -nBC 10 \"\" | tr -d ':\\n'`",
                    )
                )
        return out

    def credential_files(self, name: str) -> list[CredentialFile]:
        """The port's certificate and client CA, whose expiry the service exposes as ``name``
        (``<name>_certificate``, ``<name>_client_ca``)."""
        out = []
        if self.tls.cert_file is not None:
            out.append(CredentialFile(f"{name}_certificate", "certificate", self.tls.cert_file))
        if self.tls.client_ca_file is not None:
            out.append(CredentialFile(f"{name}_client_ca", "bundle", self.tls.client_ca_file))
        return out

    def security(self, prefix: str) -> WebSecurity:
        """The port's :class:`WebSecurity`, its files read now; :class:`ConfigError` naming the key otherwise."""
        tls: TLSServer | None = None
        if self.tls.cert_file is not None and self.tls.key_file is not None:
            config = TLSServerConfig(
                cert_file=self.tls.cert_file,
                key_file=self.tls.key_file,
                client_auth_type=self.tls.client_auth_type,
                client_ca_file=self.tls.client_ca_file,
                min_version=self.tls.min_version,
            )
            try:
                tls = TLSServer(config)
            except TLSFileError as exc:
                raise ConfigError(f"{prefix}.tls.{exc.field}: {exc}") from exc
        auth: BasicAuth | None = None
        if self.basic_auth_users:
            try:
                auth = BasicAuth(self.basic_auth_users)
            except ConfigError as exc:
                raise ConfigError(f"{prefix}.basicAuthUsers: {exc}") from exc
        return WebSecurity(tls=tls, auth=auth)
