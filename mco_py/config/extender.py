"""``mco extender`` settings (docs/extender.md#settings): ``/etc/mco/extender.yaml``, ``MCO_EXTENDER_*``, flags.

Example (every key optional; these are the defaults)::

    mode: standalone            # standalone (report file) | cluster (watch the CR)
    reportFile: /var/lib/mco/report.json
    kubeconfig: ""              # cluster mode; empty = in-cluster, then $KUBECONFIG
    crName: cluster
    crStatusTTLSeconds: 30
    fallbackWhenCROutdated: true
    hardConstraints:            # reject when the node's fresh value is above; null disables
      psiMemoryFullAvg10: 0.0
      psiIoSomeAvg10Threshold: 20.0
    volcanoVersion: "1.9"       # reply format of /volcano/<verb>: "1.9" or "1.10" (1.10 and later)
    kataRuntimeClassPrefixes: [kata]
    scoreWeight: 1.0
    unknownScore: 50.0
    maxClockSkewSeconds: 5.0
    listen: ":9879"
    maxBodyBytes: 134217728     # larger requests are answered fail-open without decoding
    logLevel: info
    maxConnections: 512         # at the cap the longest-idle connection is closed, else a new one gets 503
    headerTimeoutSeconds: 10    # first byte of a request (or the connection's opening) to its last header
    bodyTimeoutSeconds: 30      # a body (or a reply the peer does not read) without progress
    requestTimeoutSeconds: 60   # first byte to last byte of one request
    idleTimeoutSeconds: 120     # keep-alive wait for the next request (above Go's 90 s idle timeout)
    web:                        # TLS and basic auth of the port (mco_py/config/web.py); none by default
      tls: {certFile: "", keyFile: "", clientAuthType: NoClientCert, clientCaFile: "", minVersion: TLS12}
      basicAuthUsers: {}
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from mco_py.analysis.policy import PolicySettings
from mco_py.config.loader import Problem, Section, Spec
from mco_py.config.web import WebSettings
from mco_py.errors import ConfigError
from mco_py.model import SIGNAL_NAMES
from mco_py.obs.credentials import CredentialFile
from mco_py.obs.http_app import Limits

DEFAULT_PATH = Path("/etc/mco/extender.yaml")
DEFAULT_MAX_BODY = 128 * 1024 * 1024
_LIMITS = Limits()


def _default_constraints() -> dict[str, float | None]:
    return {"psiMemoryFullAvg10": 0.0, "psiIoSomeAvg10Threshold": 20.0}


class ExtenderSettings(Section, frozen=True):
    """Everything ``mco extender`` reads."""

    mode: Annotated[
        Literal["standalone", "cluster"],
        Meta(description="standalone reads reportFile; cluster watches the CR through the API"),
    ] = "standalone"
    report_file: Annotated[
        Path, Meta(description="standalone: the report the analyzer writes (checked at most every 50 ms)")
    ] = Path("/var/lib/mco/report.json")
    kubeconfig: Annotated[
        str, Meta(description="cluster: kubeconfig (empty: in-cluster, then $KUBECONFIG, ~/.kube/config)")
    ] = ""
    token_renewal: Annotated[
        bool,
        Meta(
            description="cluster: renew the kubeconfig's ServiceAccount token through TokenRequest at 80 % of its "
            "lifetime and write it back to the kubeconfig (its directory writable by the extender)"
        ),
    ] = True
    cr_name: Annotated[str, Meta(min_length=1, description="name of the NodeInterferenceReport")] = "cluster"
    cr_status_ttl_seconds: Annotated[
        float, Meta(gt=0, description="a report older than this is outdated (basic mode), seconds")
    ] = msgspec.field(default=30.0, name="crStatusTTLSeconds")
    fallback_when_cr_outdated: Annotated[
        bool, Meta(description="an outdated report switches to basic mode (false: keep using it, warning metric)")
    ] = msgspec.field(default=True, name="fallbackWhenCROutdated")
    hard_constraints: Annotated[
        dict[str, float | None],
        Meta(
            description="report signal (optionally suffixed Threshold) → reject a node whose value is above; "
            "null disables one"
        ),
    ] = msgspec.field(default_factory=_default_constraints)
    volcano_version: Annotated[
        str,
        Meta(
            description="reply format of /volcano/<verb>: 1.9 (v1.9.x) or 1.10 (v1.10 and later; 1.12 is read as 1.10)"
        ),
    ] = "1.9"
    kata_runtime_class_prefixes: Annotated[
        tuple[Annotated[str, Meta(min_length=1)], ...],
        Meta(description="a pod whose runtimeClassName starts with one of these needs a Kata node"),
    ] = ("kata",)
    score_weight: Annotated[float, Meta(ge=0, description="multiplier of the scores Volcano receives")] = 1.0
    unknown_score: Annotated[
        float,
        Meta(
            ge=0, le=100, description="neutral 0-100 score of Unknown or absent nodes, and of every node in basic mode"
        ),
    ] = 50.0
    max_clock_skew_seconds: Annotated[
        float, Meta(ge=0, description="a report dated further ahead than this is unusable, seconds")
    ] = 5.0
    listen: Annotated[str, Meta(description="[host]:port; empty host: all addresses; port 0: any free port")] = ":9879"
    max_body_bytes: Annotated[
        int, Meta(ge=1024, description="larger requests are answered fail-open without decoding")
    ] = DEFAULT_MAX_BODY
    log_level: Annotated[
        Literal["debug", "info", "warning", "error"],
        Meta(description="JSON logs on stderr from this level (debug also logs every rejection)"),
    ] = "info"
    max_connections: Annotated[
        int, Meta(ge=1, description="open connections at most (then the longest-idle one is closed, else 503)")
    ] = _LIMITS.max_connections
    header_timeout_seconds: Annotated[
        float, Meta(gt=0, description="a request's first byte (or the connection's opening) to its last header")
    ] = _LIMITS.header_timeout
    body_timeout_seconds: Annotated[
        float, Meta(gt=0, description="a body (or a reply the peer does not read) without progress")
    ] = _LIMITS.body_timeout
    request_timeout_seconds: Annotated[float, Meta(gt=0, description="first byte to last byte of one request")] = (
        _LIMITS.request_timeout
    )
    idle_timeout_seconds: Annotated[
        float, Meta(gt=0, description="keep-alive wait for the next request (above Go's 90 s idle timeout)")
    ] = _LIMITS.idle_timeout
    web: WebSettings = msgspec.field(default_factory=WebSettings)

    @property
    def address(self) -> tuple[str, int]:
        """``listen`` as (host, port)."""
        return parse_listen(self.listen)

    @property
    def volcano_reply(self) -> str:
        """The reply format ``volcanoVersion`` names: ``1.9`` or ``1.10``."""
        return normalise_volcano_version(self.volcano_version)

    @property
    def policy(self) -> PolicySettings:
        return PolicySettings(
            ttl_seconds=self.cr_status_ttl_seconds,
            hard_constraints=constraints(self.hard_constraints),
            fallback_when_outdated=self.fallback_when_cr_outdated,
            kata_runtime_class_prefixes=self.kata_runtime_class_prefixes,
            score_weight=self.score_weight,
            unknown_score=self.unknown_score,
            max_clock_skew_seconds=self.max_clock_skew_seconds,
        )

    @property
    def limits(self) -> Limits:
        return Limits(
            max_connections=self.max_connections,
            header_timeout=self.header_timeout_seconds,
            body_timeout=self.body_timeout_seconds,
            request_timeout=self.request_timeout_seconds,
            idle_timeout=self.idle_timeout_seconds,
        )


def parse_listen(text: str) -> tuple[str, int]:
    """``":9879"``, ``"127.0.0.1:9879"`` or ``"[::1]:9879"`` → (host, port); empty host = all addresses."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ConfigError(f"{text!r} is not [host]:port, e.g. ':9879'")
    port = int(port_text)
    if port > 65535:
        raise ConfigError(f"port {port} is out of range 0-65535")
    return host.strip("[]") or "0.0.0.0", port  # noqa: S104 - documented: empty host listens everywhere


def normalise_volcano_version(text: str) -> str:
    """``1.9``/``v1.9.1`` → ``1.9``; ``1.10`` and any later version → ``1.10``."""
    parts = text.strip().lstrip("v").split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise ConfigError(f"{text!r} is not a Volcano version like '1.9' or '1.10' (quote it in YAML)") from None
    if major > 1 or (major == 1 and minor >= 10):
        return "1.10"
    if major == 1 and minor == 9:
        return "1.9"
    raise ConfigError(f"Volcano {text} is not supported; use 1.9 or 1.10 (and later; quote it in YAML)")


def constraints(given: dict[str, float | None]) -> dict[str, float]:
    """``hardConstraints`` as signal → threshold, in :data:`~mco_py.model.SIGNAL_NAMES` order; null ones dropped."""
    out = {str(key).removesuffix("Threshold"): value for key, value in given.items() if value is not None}
    return {name: out[name] for name in SIGNAL_NAMES if name in out}


def _check(settings: ExtenderSettings) -> Sequence[Problem]:
    out: list[Problem] = []
    for key in ("listen", "volcanoVersion"):
        try:
            _ = settings.address if key == "listen" else settings.volcano_reply
        except ConfigError as exc:
            out.append(Problem(key, str(exc)))
    unknown = [k for k in settings.hard_constraints if k.removesuffix("Threshold") not in SIGNAL_NAMES]
    if unknown:
        out.append(
            Problem(
                "hardConstraints",
                f"unknown signal(s) {', '.join(unknown)}; use some of {', '.join(SIGNAL_NAMES)} "
                "(optionally with the suffix 'Threshold')",
            )
        )
    out += settings.web.problems("web")
    return out


def credential_files(settings: ExtenderSettings) -> list[CredentialFile]:
    """The credentials the extender loads whose expiry it exposes: its port's certificate and client
    CA (``web.tls``), its kubeconfig's token (cluster mode)."""
    out = settings.web.credential_files("web")
    if settings.mode == "cluster" and settings.kubeconfig:
        out.append(CredentialFile("kubeconfig", "kubeconfig", Path(settings.kubeconfig)))
    return out


SPEC = Spec(
    service="extender",
    settings=ExtenderSettings,
    check=_check,
    renamed_flags={"--ttl-seconds": "--cr-status-ttl-seconds"},
    retired={"decoder": "ignored: the extender always decodes with msgspec"},
    reference="docs/extender.md#settings",
)
