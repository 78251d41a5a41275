"""Extender configuration: ``/etc/mco/extender.yaml`` (camelCase keys, rendered by Ansible), flags override.

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
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from mco_py.analysis.policy import PolicySettings
from mco_py.errors import ConfigError
from mco_py.model import SIGNAL_NAMES
from mco_py.obs.http_app import Limits

DEFAULT_PATH = Path("/etc/mco/extender.yaml")
DEFAULT_MAX_BODY = 128 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    """Everything ``mco extender`` reads from its config file and flags."""

    mode: str = "standalone"
    """``standalone`` reads ``report_file``; ``cluster`` watches the CR through the API."""
    report_file: Path = Path("/var/lib/mco/report.json")
    """Standalone report document (written by the analyzer)."""
    kubeconfig: str = ""
    """Cluster mode: kubeconfig path; empty = in-cluster config, then ``$KUBECONFIG``."""
    cr_name: str = "cluster"
    """Name of the ``NodeInterferenceReport`` object."""
    volcano_version: str = "1.9"
    """Reply format for ``/volcano/<verb>``: ``1.9`` (v1.9.x) or ``1.10`` (v1.10 and later)."""
    host: str = "0.0.0.0"  # noqa: S104 - Volcano reaches it from other hosts
    """Listen address."""
    port: int = 9879
    """Listen port (0 = any free port)."""
    max_body_bytes: int = DEFAULT_MAX_BODY
    """Requests larger than this are answered fail-open without decoding."""
    log_level: str = "info"
    """Log level."""
    policy: PolicySettings = field(default_factory=PolicySettings)
    """Filter and score settings."""
    limits: Limits = field(default_factory=Limits)
    """Connection cap and timeouts."""
    notes: tuple[str, ...] = ()
    """Warnings about the file (keys that are read but no longer mean anything), logged at start."""


_KNOWN = {
    "mode", "reportFile", "kubeconfig", "crName", "crStatusTTLSeconds", "fallbackWhenCROutdated",
    "hardConstraints", "volcanoVersion", "kataRuntimeClassPrefixes", "scoreWeight", "unknownScore",
    "maxClockSkewSeconds", "listen", "maxBodyBytes", "logLevel",
    "maxConnections", "headerTimeoutSeconds", "bodyTimeoutSeconds", "requestTimeoutSeconds", "idleTimeoutSeconds",
}  # fmt: skip
#: Keys still read, with why they no longer mean anything.
_RETIRED = {"decoder": "ignored: the extender always decodes with msgspec"}


def _number(doc: Mapping[str, Any], key: str, default: float, *, minimum: float = 0.0) -> float:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{key}: must be at least {minimum:g}, got {value!r}")
    return float(value)


def _text(doc: Mapping[str, Any], key: str, default: str, choices: tuple[str, ...] = ()) -> str:
    value = doc.get(key, default)
    if value is None:
        value = default
    if isinstance(value, int | float) and not isinstance(value, bool) and key == "volcanoVersion":
        value = str(value)  # `volcanoVersion: 1.9` unquoted in YAML is a float
    if not isinstance(value, str):
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    if choices and value not in choices:
        raise ConfigError(f"{key}: {value!r} is not one of {', '.join(choices)}")
    return value


def parse_listen(text: str, *, key: str = "listen") -> tuple[str, int]:
    """``":9879"``, ``"127.0.0.1:9879"`` or ``"[::1]:9879"`` → (host, port); empty host = all addresses."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise ConfigError(f"{key}: {text!r} needs the form [host]:port, e.g. ':9879'")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"{key}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"{key}: port {port} is out of range 0-65535")
    host = host.strip("[]") or "0.0.0.0"  # noqa: S104 - documented: empty host listens everywhere
    return host, port


def normalise_volcano_version(text: str, *, key: str = "volcanoVersion") -> str:
    """``1.9``/``v1.9.1`` → ``1.9``; ``1.10`` and any later version → ``1.10``."""
    parts = text.strip().lstrip("v").split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise ConfigError(f"{key}: {text!r} is not a Volcano version like '1.9' or '1.10'") from None
    if major > 1 or (major == 1 and minor >= 10):
        return "1.10"
    if major == 1 and minor == 9:
        return "1.9"
    raise ConfigError(f"{key}: Volcano {text} is not supported; use 1.9 or 1.10 (and later)")


def _constraints(value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"hardConstraints: expected a mapping of signal to threshold, got {value!r}")
    out: dict[str, float] = {}
    for key, threshold in value.items():
        signal = str(key).removesuffix("Threshold")
        if signal not in SIGNAL_NAMES:
            raise ConfigError(
                f"hardConstraints.{key}: unknown signal; use one of {', '.join(SIGNAL_NAMES)} "
                "(optionally with the suffix 'Threshold')"
            )
        if threshold is None:
            continue  # null disables this constraint
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not math.isfinite(threshold):
            raise ConfigError(f"hardConstraints.{key}: expected a number or null, got {threshold!r}")
        out[signal] = float(threshold)
    return {name: out[name] for name in SIGNAL_NAMES if name in out}  # checked in this order


def config_from_mapping(doc: Mapping[str, Any], *, source: str = "config") -> ExtenderConfig:
    """Validate a config document; :class:`ConfigError` names the key and the fix."""
    try:
        return _from_mapping(doc)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _from_mapping(doc: Mapping[str, Any]) -> ExtenderConfig:
    if not isinstance(doc, Mapping):
        raise ConfigError("expected a mapping of settings at the top level")
    unknown = sorted(str(k) for k in doc if k not in _KNOWN and k not in _RETIRED)
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(_KNOWN))}")
    prefixes = doc.get("kataRuntimeClassPrefixes", ["kata"])
    if prefixes is None:
        prefixes = []
    if not isinstance(prefixes, list) or not all(isinstance(p, str) and p for p in prefixes):
        raise ConfigError(f"kataRuntimeClassPrefixes: expected a list of non-empty strings, got {prefixes!r}")
    fallback = doc.get("fallbackWhenCROutdated", True)
    if not isinstance(fallback, bool):
        raise ConfigError(f"fallbackWhenCROutdated: expected true or false, got {fallback!r}")
    unknown_score = _number(doc, "unknownScore", 50.0)
    if unknown_score > 100:
        raise ConfigError(f"unknownScore: must be within 0-100, got {unknown_score:g}")
    ttl = _number(doc, "crStatusTTLSeconds", 30.0)
    if ttl <= 0:
        raise ConfigError("crStatusTTLSeconds: must be above 0")
    policy = PolicySettings(
        ttl_seconds=ttl,
        hard_constraints=_constraints(
            doc.get("hardConstraints", {"psiMemoryFullAvg10": 0.0, "psiIoSomeAvg10Threshold": 20.0})
        ),
        fallback_when_outdated=fallback,
        kata_runtime_class_prefixes=tuple(prefixes),
        score_weight=_number(doc, "scoreWeight", 1.0),
        unknown_score=unknown_score,
        max_clock_skew_seconds=_number(doc, "maxClockSkewSeconds", 5.0),
    )
    host, port = parse_listen(_text(doc, "listen", ":9879"))
    max_body = doc.get("maxBodyBytes", DEFAULT_MAX_BODY)
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1024:
        raise ConfigError(f"maxBodyBytes: expected an integer of at least 1024, got {max_body!r}")
    limits = _limits(doc)
    cr_name = _text(doc, "crName", "cluster")
    if not cr_name:
        raise ConfigError("crName: must not be empty")
    return ExtenderConfig(
        mode=_text(doc, "mode", "standalone", ("standalone", "cluster")),
        report_file=Path(_text(doc, "reportFile", "/var/lib/mco/report.json")),
        kubeconfig=_text(doc, "kubeconfig", ""),
        cr_name=cr_name,
        volcano_version=normalise_volcano_version(_text(doc, "volcanoVersion", "1.9")),
        host=host,
        port=port,
        max_body_bytes=max_body,
        log_level=_text(doc, "logLevel", "info", ("debug", "info", "warning", "error")),
        policy=policy,
        limits=limits,
        notes=tuple(f"{key}: {why}; remove it from the file" for key, why in _RETIRED.items() if key in doc),
    )


def _limits(doc: Mapping[str, Any]) -> Limits:
    default = Limits()
    cap = doc.get("maxConnections", default.max_connections)
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise ConfigError(f"maxConnections: expected a whole number of at least 1, got {cap!r}")
    seconds = {
        key: _number(doc, key, getattr(default, attr))
        for key, attr in (
            ("headerTimeoutSeconds", "header_timeout"),
            ("bodyTimeoutSeconds", "body_timeout"),
            ("requestTimeoutSeconds", "request_timeout"),
            ("idleTimeoutSeconds", "idle_timeout"),
        )
    }
    for key, value in seconds.items():
        if value <= 0:
            raise ConfigError(f"{key}: must be above 0 (a connection without a deadline can be held forever)")
    return Limits(
        max_connections=cap,
        header_timeout=seconds["headerTimeoutSeconds"],
        body_timeout=seconds["bodyTimeoutSeconds"],
        request_timeout=seconds["requestTimeoutSeconds"],
        idle_timeout=seconds["idleTimeoutSeconds"],
    )


def load_config(path: Path, *, required: bool = False) -> ExtenderConfig:
    """Read and validate ``path``; a missing file gives the defaults unless ``required``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise ConfigError(f"{path} does not exist; create it or pass --config with an existing file") from None
        return ExtenderConfig()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    return config_from_mapping(doc if doc is not None else {}, source=str(path))


def with_overrides(cfg: ExtenderConfig, overrides: Mapping[str, Any]) -> ExtenderConfig:
    """Apply flag values (``None`` = not given) on top of the file's settings, validated the same way."""
    values = {k: v for k, v in overrides.items() if v is not None}
    if not values:
        return cfg
    changes: dict[str, Any] = {}
    policy_changes: dict[str, Any] = {}
    for key, value in values.items():
        if key == "listen":
            changes["host"], changes["port"] = parse_listen(value, key="--listen")
        elif key == "volcano_version":
            changes[key] = normalise_volcano_version(value, key="--volcano-version")
        elif key in ("ttl_seconds", "score_weight", "unknown_score"):
            policy_changes[key] = value
        elif key == "report_file":
            changes[key] = Path(value)
        else:
            changes[key] = value
    if policy_changes.get("ttl_seconds", 1.0) <= 0:
        raise ConfigError("--ttl-seconds: must be above 0")
    if policy_changes.get("score_weight", 0.0) < 0:
        raise ConfigError("--score-weight: must be at least 0")
    if changes.get("max_body_bytes", 1024) < 1024:
        raise ConfigError("--max-body-bytes: must be at least 1024")
    if policy_changes:
        changes["policy"] = replace(cfg.policy, **policy_changes)
    return replace(cfg, **changes)
