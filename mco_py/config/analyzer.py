"""``mco analyzer`` settings (docs/analyzer.md#settings): ``/etc/mco/analyzer.yaml``, ``MCO_ANALYZER_*``, flags.

Example::

    mode: cluster
    reportInterval: 5
    tlsCert: /etc/mco/pki/analyzer.pem
    tlsKey: /etc/mco/pki/analyzer-key.pem
    tlsCa: /etc/mco/pki/ca.pem
    tokenFile: /etc/mco/analyzer.token
    metricsWeb:                 # TLS and basic auth of /metrics (mco_py/config/web.py)
      basicAuthUsers: {prometheus: $2b$10$GBZHQ539Jd2UdTQ3ZeEC9eC1unLoAQaKYDJSBdEGcaZqtx6Xoj.NG}
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from mco_py.config.loader import Problem, Section, Spec
from mco_py.config.web import WebSettings
from mco_py.obs.credentials import CredentialFile
from mco_py.report.size import DEFAULT_STATUS_BUDGET

DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024


class AnalyzerSettings(Section, frozen=True):
    """Everything ``mco analyzer`` reads."""

    mode: Annotated[
        Literal["standalone", "cluster"],
        Meta(description="standalone (file report, file rules, always leader) or cluster (CR, ConfigMap, Lease)"),
    ] = "standalone"
    report_file: Annotated[str, Meta(description="standalone: the report document, written atomically")] = (
        "/var/lib/mco/report.json"
    )
    report_name: Annotated[str, Meta(min_length=1, description="cluster: name of the NodeInterferenceReport")] = (
        "cluster"
    )
    rules_file: Annotated[
        str, Meta(description="standalone: detection rules (missing: built-in defaults, with a warning)")
    ] = "/etc/mco/rules.yaml"
    rules_config_map: Annotated[str, Meta(description="cluster: ConfigMap with the rules under key rules.yaml")] = (
        "mco-detection-rules"
    )
    namespace: Annotated[str, Meta(description="cluster: namespace of the rules ConfigMap and the Lease")] = (
        "mco-system"
    )
    rules_interval: Annotated[float, Meta(gt=0, description="seconds between rules reloads")] = 30.0
    kubeconfig: Annotated[str, Meta(description="cluster: kubeconfig path (empty: in-cluster, then $KUBECONFIG)")] = ""
    token_renewal: Annotated[
        bool,
        Meta(
            description="cluster: renew the kubeconfig's ServiceAccount token through TokenRequest at 80 % of its "
            "lifetime and write it back to the kubeconfig (its directory writable by the analyzer)"
        ),
    ] = True
    listen: Annotated[
        str, Meta(description="gRPC address for collector streams (:PORT: every interface; port 0: any free)")
    ] = ":9876"
    metrics_host: Annotated[str, Meta(description="address of /metrics")] = "0.0.0.0"  # noqa: S104 - scraped remotely
    metrics_port: Annotated[int, Meta(ge=0, le=65535, description="port of /metrics (0: any free port)")] = 9878
    metrics_web: WebSettings = msgspec.field(default_factory=WebSettings)
    report_interval: Annotated[
        float, Meta(gt=0, description="seconds between reports (written even when nothing changed)")
    ] = 5.0
    report_min_interval: Annotated[
        float,
        Meta(
            ge=0,
            description="after a level change, report this long after the previous one (0: only every reportInterval)",
        ),
    ] = 1.0
    identity: Annotated[str, Meta(description="this replica's name in the report and the Lease (empty: host name)")] = (
        ""
    )
    lease_name: Annotated[str, Meta(description="cluster: the Lease that elects the one writer")] = "mco-analyzer"
    lease_duration: Annotated[
        float, Meta(gt=0, description="cluster: leaseDurationSeconds; renewals every third of it")
    ] = 15.0
    tls_cert: Annotated[str, Meta(description="server certificate (PEM); with tlsKey turns TLS on")] = ""
    tls_key: Annotated[str, Meta(description="server private key (PEM)")] = ""
    tls_ca: Annotated[str, Meta(description="CA for client certificates: mTLS and per-node authorization")] = ""
    tls_signer_cert: Annotated[
        str,
        Meta(
            description="signing CA (an intermediate of the MCO CA, from mco_pki) that renews collectors' client "
            "certificates (Renew call) and this analyzer's own certificates; empty: no renewal here"
        ),
    ] = ""
    tls_signer_key: Annotated[str, Meta(description="the signing CA's key (PEM; readable by the analyzer only)")] = ""
    cert_term: Annotated[
        float, Meta(ge=10, description="lifetime of the certificates the signing CA issues, seconds (365 days)")
    ] = 365 * 86400.0
    cert_renewal: Annotated[
        bool,
        Meta(
            description="with a signing CA: renew this analyzer's tlsCert and metricsWeb.tls.certFile (new key, same "
            "names) at certRenewAt of their lifetime. false: they expire unless the controller reissues them "
            "(playbooks/mco.yml)"
        ),
    ] = True
    cert_renew_at: Annotated[
        float, Meta(gt=0, lt=1, description="share of a certificate's lifetime after which it is renewed (jittered)")
    ] = 0.67
    token_file: Annotated[str, Meta(description="bearer token collectors must send (empty: no token check)")] = ""
    max_message_bytes: Annotated[
        int,
        Meta(
            ge=1024,
            description="largest SampleBatch accepted (larger: its samples rejected as oversize_message; over 4x: "
            "RESOURCE_EXHAUSTED, that stream only)",
        ),
    ] = DEFAULT_MAX_MESSAGE_BYTES
    max_report_bytes: Annotated[
        int, Meta(ge=0, description="cluster: size budget of the report status (0: no check)")
    ] = DEFAULT_STATUS_BUDGET
    report_shards: Annotated[
        bool,
        Meta(
            description="cluster: a report over maxReportBytes is split into NodeInterferenceReportShard objects with "
            "every node in full (false: one object, detail stripped and then nodes left out to fit)"
        ),
    ] = True
    shard_refresh: Annotated[
        float,
        Meta(
            gt=0,
            description="cluster, sharded report: seconds between whole writes of each shard (level changes are "
            "written at once, in the report object)",
        ),
    ] = 60.0
    max_nodes: Annotated[int, Meta(ge=1, description="most nodes tracked at once; samples for more are rejected")] = (
        65536
    )
    max_clock_skew: Annotated[
        float,
        Meta(
            ge=0,
            description="samples further ahead of the analyzer's clock are rejected, seconds (a sample from the "
            "future would make the node's real samples out_of_order until then)",
        ),
    ] = 10.0
    max_sample_age: Annotated[float, Meta(gt=0, description="samples older than this are rejected, seconds")] = 300.0
    log_level: Annotated[
        Literal["debug", "info", "warning", "error"], Meta(description="JSON logs on stderr from this level")
    ] = "info"
    guard_pods: Annotated[
        bool,
        Meta(
            description="cluster: watch Pods, send each collector its node's pods with their class, and post the "
            "node guards' changes as Events on Nodes (needs the RBAC of mco_guard_pods)"
        ),
    ] = False


def _check(settings: AnalyzerSettings) -> Sequence[Problem]:
    out: list[Problem] = []
    if bool(settings.tls_cert) != bool(settings.tls_key):
        out.append(Problem("tlsCert", "tlsCert and tlsKey go together (the server certificate and its key)"))
    if settings.tls_ca and not settings.tls_cert:
        out.append(Problem("tlsCa", "mTLS needs the server certificate too: set tlsCert and tlsKey"))
    if bool(settings.tls_signer_cert) != bool(settings.tls_signer_key):
        out.append(Problem("tlsSignerCert", "tlsSignerCert and tlsSignerKey go together (the signing CA and its key)"))
    if settings.tls_signer_cert and not settings.tls_ca:
        out.append(
            Problem(
                "tlsSignerCert", "renewals are signed for the caller's verified client certificate: set tlsCa (mTLS)"
            )
        )
    out += settings.metrics_web.problems("metricsWeb")
    return out


def credential_files(settings: AnalyzerSettings) -> list[CredentialFile]:
    """The credentials the analyzer loads whose expiry it exposes (the shared bearer token never expires)."""
    out = []
    if settings.tls_cert:
        out.append(CredentialFile("grpc_certificate", "certificate", Path(settings.tls_cert)))
    if settings.tls_ca:
        out.append(CredentialFile("grpc_client_ca", "bundle", Path(settings.tls_ca)))
    if settings.tls_signer_cert:
        out.append(CredentialFile("signing_ca", "certificate", Path(settings.tls_signer_cert)))
    if settings.mode == "cluster" and settings.kubeconfig:
        out.append(CredentialFile("kubeconfig", "kubeconfig", Path(settings.kubeconfig)))
    return out + settings.metrics_web.credential_files("metrics")


SPEC = Spec(
    service="analyzer",
    settings=AnalyzerSettings,
    check=_check,
    # Up to 0.x the file also took the snake_case field names (the role rendered them).
    renamed={
        field.name: field.encode_name
        for field in msgspec.structs.fields(AnalyzerSettings)
        if field.name not in (field.encode_name, "metrics_web")  # metricsWeb never had another name
    }
    | {"rules_configmap": "rulesConfigMap", "rulesConfigmap": "rulesConfigMap"},
    renamed_flags={"--rules-configmap": "--rules-config-map"},
    reference="docs/analyzer.md#settings",
)
