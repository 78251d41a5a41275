"""Collector settings: defaults < YAML file < environment < command-line flags.

YAML keys and flag names are the field names below (``bio_backend`` /
``--bio-backend``); environment variables are ``MCO_COLLECTOR_<KEY>`` (upper
case) and ``NODE_NAME`` for the node name. List values (``analyzers``) are
comma-separated in the environment.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mco_py.analysis.guard import GuardRules, rules_from_mapping
from mco_py.collector.biolatency import BACKENDS
from mco_py.errors import ConfigError

ENV_PREFIX = "MCO_COLLECTOR_"
MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 300.0
MAX_FLUSH_S = 60.0  # the analyzer counts a node stale after 30 s without samples by default


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """How the collector talks to its analyzers."""

    analyzers: tuple[str, ...] = ()
    """Analyzer addresses ``host:port``; every sample goes to each."""
    buffer_samples: int = 600
    """Send buffer per analyzer; when full the oldest sample is dropped (and counted)."""
    batch_max: int = 100
    """Most samples per SampleBatch (a backlog after a reconnect is sent in batches)."""
    flush_interval_s: float = 5.0
    """Send at most this often once caught up (the samples in between go in one batch); 0 sends each at once."""
    backoff_initial_s: float = 0.5
    """First reconnect delay; doubles per failed attempt."""
    backoff_max_s: float = 30.0
    """Largest reconnect delay (each delay is jittered between half and all of it)."""
    keepalive_time_ms: int = 30_000
    """HTTP/2 keepalive ping interval (the analyzer must permit it)."""
    keepalive_timeout_ms: int = 10_000
    """Time to wait for a keepalive ack before the connection counts as dead."""
    tls_ca: Path | None = None
    """CA bundle to verify the analyzer; enables TLS."""
    tls_cert: Path | None = None
    """Client certificate (mTLS); needs ``tls_key``."""
    tls_key: Path | None = None
    """Client private key (mTLS)."""
    tls_server_name: str = ""
    """Expected server name when it differs from the address host."""
    token_file: Path | None = None
    """File with a shared bearer token sent as ``authorization: Bearer <token>``."""


@dataclass(frozen=True, slots=True)
class CollectorSettings:
    """Everything ``mco collector`` needs; one docstring per key."""

    node_name: str = field(default_factory=socket.gethostname)
    """Node name (must match the Kubernetes Node name); default the host name."""
    interval_s: float = 1.0
    """Sample interval, seconds (rates cover one interval)."""
    proc_root: Path = Path("/proc")
    """Root of procfs (a fixture tree in tests)."""
    sys_root: Path = Path("/sys")
    """Root of sysfs."""
    tracefs_root: Path = Path("/sys/kernel/tracing")
    """Where tracefs is (or gets) mounted, for the tracefs backend."""
    metrics_host: str = "0.0.0.0"  # noqa: S104 - Prometheus scrapes from other hosts
    """Address of /metrics."""
    metrics_port: int = 9877
    """Port of /metrics (0 picks a free one)."""
    bio_backend: str = "auto"
    """Block latency backend: auto|libbpf|bcc|tracefs|diskstats|off."""
    bio_min_events: int = 20
    """Fewest block requests in a window for a P99 (fewer: absent, insufficient data)."""
    bpf_dir: Path | None = None
    """Directory with biolatency.bpf.o; default the package's data/bpf."""
    llc: str = "auto"
    """LLC miss rate from perf hardware counters: auto|off."""
    resctrl: str = "auto"
    """resctrl occupancy/bandwidth extras: auto|off."""
    stream: bool = True
    """Stream samples to the analyzers (false: Prometheus exporter only)."""
    analyzers: tuple[str, ...] = ()
    """Analyzer addresses host:port (every sample goes to each)."""
    buffer_samples: int = 600
    """Send buffer per analyzer, samples (oldest dropped when full)."""
    flush_interval_s: float = 5.0
    """Send to the analyzers at most this often, seconds; every sample still goes (several per message); 0 = at once."""
    backoff_initial_s: float = 0.5
    """First reconnect delay, seconds."""
    backoff_max_s: float = 30.0
    """Largest reconnect delay, seconds."""
    keepalive_time_ms: int = 30_000
    """gRPC keepalive ping interval."""
    tls_ca: Path | None = None
    """CA bundle for the analyzer's certificate (enables TLS)."""
    tls_cert: Path | None = None
    """Client certificate for mTLS."""
    tls_key: Path | None = None
    """Client key for mTLS."""
    tls_server_name: str = ""
    """Server name to verify when it differs from the address."""
    token_file: Path | None = None
    """File holding the shared bearer token."""
    log_level: str = "info"
    guard: str = "off"
    """The node guard (docs/collector.md#node-guard): off, dry-run (decides and reports only) or on."""
    guard_interval_s: float = 1.0
    """How often the guard measures and decides, seconds."""
    cgroup_root: Path = Path("/sys/fs/cgroup")
    """Where the cgroup hierarchies are mounted."""
    online_cgroups: tuple[str, ...] = ()
    """Groups of latency-sensitive work, relative to the cgroup root (``online.slice``): watched, never limited."""
    offline_cgroups: tuple[str, ...] = ()
    """Groups of batch work the guard may limit (``offline.slice``)."""
    guard_journal: Path = Path("/var/lib/mco/guard-limits.json")
    """Where the guard records the limits it replaced (restored on exit and after a crash)."""
    guard_rules: GuardRules = field(default_factory=GuardRules)
    """When and how far the guard limits offline CPU (a mapping in the file only); the guard
    section of the analyzer's detection rules replaces it once an analyzer sends one."""
    guard_resources: tuple[str, ...] = ("cpu", "memory", "io")
    """What the guard may limit: any of cpu, memory, io (each moved by the online groups' pressure on it)."""
    kubelet_cgroup_driver: str = "auto"
    """Where the kubelet puts pod cgroups: auto (kubepods.slice: systemd, kubepods: cgroupfs), systemd, cgroupfs."""
    """debug|info|warning|error."""

    def stream_config(self) -> StreamConfig:
        """The gRPC stream part."""
        return StreamConfig(
            analyzers=self.analyzers,
            buffer_samples=self.buffer_samples,
            flush_interval_s=self.flush_interval_s,
            backoff_initial_s=self.backoff_initial_s,
            backoff_max_s=self.backoff_max_s,
            keepalive_time_ms=self.keepalive_time_ms,
            tls_ca=self.tls_ca,
            tls_cert=self.tls_cert,
            tls_key=self.tls_key,
            tls_server_name=self.tls_server_name,
            token_file=self.token_file,
        )


FIELDS = {f.name: f for f in dataclasses.fields(CollectorSettings)}
_CHOICES = {
    "bio_backend": BACKENDS,
    "llc": ("auto", "off"),
    "resctrl": ("auto", "off"),
    "log_level": ("debug", "info", "warning", "error"),
    "guard": ("off", "dry-run", "on"),
    "kubelet_cgroup_driver": ("auto", "systemd", "cgroupfs"),
}


def _to_path(value: Any) -> Path | None:
    return None if value in (None, "") else Path(str(value))


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("a boolean")
    return float(value)


def _to_int(value: Any) -> int:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError("not an integer")
    return int(value)


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("not a boolean (true/false)")


def _to_list(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ValueError("expected a list of host:port")
    return tuple(str(i).strip() for i in items if str(i).strip())


_CONVERTERS: dict[str, Any] = {
    "Path": _to_path,
    "Path | None": _to_path,
    "float": _to_float,
    "int": _to_int,
    "bool": _to_bool,
    "tuple[str, ...]": _to_list,
    "str": str,
    "GuardRules": rules_from_mapping,
}


def _to_mode(value: Any) -> str:
    """``guard``: YAML 1.1 reads an unquoted ``on``/``off`` as a boolean; take it as meant."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


#: Settings converted by their own rule rather than by their type's.
_KEY_CONVERTERS: dict[str, Any] = {"guard": _to_mode}


def _convert(key: str, value: Any, where: str, problems: list[str]) -> Any:
    kind = str(FIELDS[key].type)
    try:
        return _KEY_CONVERTERS.get(key, _CONVERTERS[kind])(value)
    except ConfigError as exc:
        problems.append(f"{where}: {exc}")
        return None
    except (TypeError, ValueError) as exc:
        problems.append(f"{where}: {value!r} is not a valid {kind} ({exc})")
        return None


def _validate(settings: CollectorSettings, problems: list[str]) -> None:
    for key, choices in _CHOICES.items():
        if getattr(settings, key) not in choices:
            problems.append(f"{key}: {getattr(settings, key)!r}; expected one of {', '.join(choices)}")
    if not MIN_INTERVAL_S <= settings.interval_s <= MAX_INTERVAL_S:
        problems.append(f"interval_s: {settings.interval_s}; expected {MIN_INTERVAL_S}-{MAX_INTERVAL_S} seconds")
    if not 0 <= settings.metrics_port <= 65535:
        problems.append(f"metrics_port: {settings.metrics_port}; expected 0-65535")
    _validate_stream(settings, problems)
    if settings.bio_min_events < 1:
        problems.append(f"bio_min_events: {settings.bio_min_events}; expected at least 1")
    pods = settings.stream and settings.analyzers
    if settings.guard != "off" and not pods and not (settings.online_cgroups and settings.offline_cgroups):
        problems.append(
            f"guard: {settings.guard} needs online_cgroups (whose pressure it watches) and offline_cgroups (it "
            "limits), or analyzers to stream to (they name the node's online and offline pods)"
        )
    unknown = [r for r in settings.guard_resources if r not in ("cpu", "memory", "io")]
    if unknown or not settings.guard_resources:
        problems.append(f"guard_resources: {list(settings.guard_resources)}; expected some of cpu, memory, io")
    if not MIN_INTERVAL_S <= settings.guard_interval_s <= MAX_INTERVAL_S:
        problems.append(f"guard_interval_s: {settings.guard_interval_s}; expected {MIN_INTERVAL_S}-{MAX_INTERVAL_S} s")
    if not settings.node_name.strip():
        problems.append("node_name is empty; pass --node-name or set NODE_NAME")


def _validate_stream(settings: CollectorSettings, problems: list[str]) -> None:
    if not 0 <= settings.flush_interval_s <= MAX_FLUSH_S:
        problems.append(f"flush_interval_s: {settings.flush_interval_s}; expected 0-{MAX_FLUSH_S:g} seconds")
    if settings.buffer_samples < 1:
        problems.append(f"buffer_samples: {settings.buffer_samples}; expected at least 1")
    if not 0 < settings.backoff_initial_s <= settings.backoff_max_s:
        problems.append("backoff_initial_s must be > 0 and <= backoff_max_s")
    for address in settings.analyzers:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            problems.append(f"analyzers: {address!r} is not host:port (e.g. analyzer.example:9876)")
    if settings.stream and not settings.analyzers:
        problems.append("no analyzer address: pass --analyzer host:9876 (repeatable) or --no-stream")
    if (settings.tls_cert is None) != (settings.tls_key is None):
        problems.append("tls_cert and tls_key must be given together")


def _merge_env(env: Mapping[str, str], values: dict[str, Any], problems: list[str]) -> None:
    for key, value in env.items():
        if key == "NODE_NAME" and value:
            values["node_name"] = value
        elif key.startswith(ENV_PREFIX):
            name = key[len(ENV_PREFIX) :].lower()
            if name in FIELDS:
                values[name] = _convert(name, value, f"environment {key}", problems)
            else:
                problems.append(f"environment {key}: unknown setting {name!r}")


def load_settings(
    *,
    file_text: str | None = None,
    file_name: str = "config",
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> CollectorSettings:
    """Merge the layers and validate; raises :class:`ConfigError` listing every problem."""
    problems: list[str] = []
    values: dict[str, Any] = {}
    if file_text:
        try:
            document = yaml.safe_load(file_text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{file_name}: not valid YAML: {exc}") from exc
        if document is None:
            document = {}
        if not isinstance(document, dict):
            raise ConfigError(f"{file_name}: expected a mapping of settings, got {type(document).__name__}")
        for key, value in document.items():
            if key not in FIELDS:
                problems.append(f"{file_name}: unknown key {key!r} (known: {', '.join(sorted(FIELDS))})")
                continue
            values[key] = _convert(key, value, f"{file_name}: {key}", problems)
    _merge_env(env or {}, values, problems)
    for key, value in (flags or {}).items():
        if value is None:
            continue
        if key not in FIELDS:
            raise ConfigError(f"internal: unknown flag {key}")
        values[key] = _convert(key, value, f"--{key.replace('_', '-')}", problems)
    if problems:
        raise ConfigError("invalid collector settings: " + "; ".join(problems))
    settings = CollectorSettings(**{k: v for k, v in values.items() if v is not None})
    _validate(settings, problems)
    if problems:
        raise ConfigError("invalid collector settings: " + "; ".join(problems))
    return settings
