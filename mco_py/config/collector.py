"""``mco collector`` settings (docs/collector.md#settings): ``/etc/mco/collector.yaml``, ``MCO_COLLECTOR_*``, flags.

Example (every key optional)::

    nodeName: worker-1          # must equal the Kubernetes Node name (env NODE_NAME too)
    interval: 1.0
    stream:
      analyzers: [analyzer-1:9876, analyzer-2:9876]
      flushInterval: 5
      tlsCa: /etc/mco/pki/ca.pem
    guard:
      mode: "on"
      rules: {throttleAbove: 20}
    onlineCgroups: [online.slice]
    offlineCgroups: [offline.slice]
    metricsWeb:                 # TLS and basic auth of /metrics (mco_py/config/web.py)
      tls: {certFile: /etc/mco/pki/collector.pem, keyFile: /etc/mco/pki/collector-key.pem}
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from mco_py.analysis.guard import GuardRules
from mco_py.config.loader import Problem, Section, Spec
from mco_py.config.web import WebSettings
from mco_py.errors import ConfigError
from mco_py.obs.credentials import CredentialFile

LogLevel = Literal["debug", "info", "warning", "error"]
BioBackend = Literal["auto", "libbpf", "bcc", "tracefs", "diskstats", "off"]
Resource = Literal["cpu", "memory", "io"]
MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 300.0
MAX_FLUSH_S = 60.0
#: Share of a certificate's lifetime after which the services renew it (the controller's is 2/3 too).
RENEW_AT = 0.67  # the analyzer counts a node stale after 30 s without samples by default

_RULES = GuardRules()


class StreamSettings(Section, frozen=True):
    """How the collector sends its samples to the analyzers (gRPC)."""

    enabled: Annotated[bool, Meta(description="stream samples to the analyzers (false: /metrics only)")] = True
    analyzers: Annotated[
        tuple[str, ...], Meta(description="analyzer addresses host:port; every sample goes to each")
    ] = ()
    buffer_samples: Annotated[
        int, Meta(ge=1, description="send buffer per analyzer, samples; the oldest is dropped (counted) when full")
    ] = 600
    batch_max: Annotated[int, Meta(ge=1, description="most samples per message (a backlog goes in batches)")] = 100
    flush_interval: Annotated[
        float,
        Meta(
            ge=0,
            le=MAX_FLUSH_S,
            description="send at most this often, seconds; every sample still goes (several per message); 0: at once",
        ),
    ] = 5.0
    backoff_initial: Annotated[float, Meta(gt=0, description="first reconnect delay, seconds; doubles per failure")] = (
        0.5
    )
    backoff_max: Annotated[
        float, Meta(gt=0, description="largest reconnect delay, seconds (each jittered between half and all of it)")
    ] = 30.0
    keepalive_time_ms: Annotated[
        int, Meta(ge=1, description="HTTP/2 keepalive ping interval, ms (the analyzer must permit it)")
    ] = 30_000
    keepalive_timeout_ms: Annotated[
        int, Meta(ge=1, description="wait for a keepalive ack before the connection counts as dead, ms")
    ] = 10_000
    tls_ca: Annotated[Path | None, Meta(description="CA bundle to verify the analyzer (turns TLS on)")] = None
    tls_cert: Annotated[Path | None, Meta(description="client certificate (mTLS; needs tlsKey)")] = None
    tls_key: Annotated[Path | None, Meta(description="client private key (mTLS)")] = None
    tls_server_name: Annotated[str, Meta(description="server name to verify when it differs from the address")] = ""
    token_file: Annotated[
        Path | None, Meta(description="file with the shared bearer token (re-read at each connect)")
    ] = None
    cert_renewal: Annotated[
        bool,
        Meta(
            description="renew tlsCert through an analyzer (Renew call; a new key made here, it never leaves the "
            "host) at certRenewAt of its lifetime; tlsCert, tlsKey and their directory writable by the collector. "
            "false: the certificate expires unless the controller reissues it (playbooks/mco.yml)"
        ),
    ] = True
    cert_renew_at: Annotated[
        float,
        Meta(gt=0, lt=1, description="share of the client certificate's lifetime after which it is renewed (jittered)"),
    ] = RENEW_AT


class GuardRuleSettings(Section, frozen=True):
    """When and how far the guard limits offline work; the analyzer's rules replace them once it sends some."""

    throttle_above: Annotated[
        float, Meta(description="online CPU stall share of an interval, percent, that cuts the offline limit")
    ] = _RULES.throttle_above
    release_below: Annotated[float, Meta(description="at or below this share the interval counts as calm")] = (
        _RULES.release_below
    )
    calm_intervals: Annotated[int, Meta(description="calm intervals in a row before one step up")] = (
        _RULES.calm_intervals
    )
    step_down: Annotated[float, Meta(description="each cut multiplies the limit by this")] = _RULES.step_down
    step_up: Annotated[float, Meta(description="each step up adds this share of the node's CPUs")] = _RULES.step_up
    floor: Annotated[float, Meta(description="the limit never goes below this share of the node's CPUs")] = _RULES.floor
    io_target: Annotated[
        float, Meta(description="online I/O stall share, percent, the offline I/O limit is steered to")
    ] = _RULES.io_target
    io_floor: Annotated[
        float, Meta(description="the I/O limit never goes below this share of the offline rate when first limited")
    ] = _RULES.io_floor

    def rules(self) -> GuardRules:
        return GuardRules(**msgspec.structs.asdict(self))


class GuardSettings(Section, frozen=True):
    """The node guard (docs/collector.md#node-guard)."""

    mode: Annotated[
        Literal["off", "dry-run", "on"], Meta(description="off, dry-run (decides and reports only) or on")
    ] = "off"
    interval: Annotated[
        float,
        Meta(ge=MIN_INTERVAL_S, le=MAX_INTERVAL_S, description="how often the guard measures and decides, s"),
    ] = 1.0
    journal: Annotated[Path, Meta(description="the limits the guard replaced, restored on exit and after a crash")] = (
        Path("/var/lib/mco/guard-limits.json")
    )
    resources: Annotated[
        tuple[Resource, ...], Meta(description="what the guard may limit, each when the online groups stall on it")
    ] = ("cpu", "memory", "io")
    rules: GuardRuleSettings = msgspec.field(default_factory=GuardRuleSettings)


class CollectorSettings(Section, frozen=True):
    """Everything ``mco collector`` reads."""

    node_name: Annotated[str, Meta(description="node name, must equal the Kubernetes Node name")] = msgspec.field(
        default_factory=socket.gethostname
    )
    interval: Annotated[
        float,
        Meta(
            ge=MIN_INTERVAL_S,
            le=MAX_INTERVAL_S,
            description="sample interval, seconds (an analyzer may change it with SetInterval)",
        ),
    ] = 1.0
    proc_root: Annotated[Path, Meta(description="procfs root (a fixture tree in tests)")] = Path("/proc")
    sys_root: Annotated[Path, Meta(description="sysfs root")] = Path("/sys")
    tracefs_root: Annotated[Path, Meta(description="tracefs mount point (tracefs backend)")] = Path(
        "/sys/kernel/tracing"
    )
    metrics_host: Annotated[str, Meta(description="address of /metrics")] = "0.0.0.0"  # noqa: S104 - scraped remotely
    metrics_port: Annotated[int, Meta(ge=0, le=65535, description="port of /metrics (0: any free port)")] = 9877
    metrics_web: WebSettings = msgspec.field(default_factory=WebSettings)
    bio_backend: Annotated[BioBackend, Meta(description="block-latency backend; auto tries them in order")] = "auto"
    bio_min_events: Annotated[int, Meta(ge=1, description="fewest block requests in a window for a P99")] = 20
    bpf_dir: Annotated[
        Path | None, Meta(description="directory with biolatency.bpf.o (default: the package's data/bpf)")
    ] = None
    llc: Annotated[Literal["auto", "off"], Meta(description="LLC miss rate from perf hardware counters")] = "auto"
    resctrl: Annotated[Literal["auto", "off"], Meta(description="resctrl occupancy and bandwidth extras")] = "auto"
    log_level: Annotated[LogLevel, Meta(description="JSON logs on stderr from this level")] = "info"
    cgroup_root: Annotated[Path, Meta(description="where the cgroup hierarchies are mounted")] = Path("/sys/fs/cgroup")
    online_cgroups: Annotated[
        tuple[str, ...], Meta(description="groups of latency-sensitive work below cgroupRoot: watched, never limited")
    ] = ()
    offline_cgroups: Annotated[
        tuple[str, ...], Meta(description="groups of batch work below cgroupRoot that the guard may limit")
    ] = ()
    kubelet_cgroup_driver: Annotated[
        Literal["auto", "systemd", "cgroupfs"], Meta(description="where the kubelet puts pod cgroups")
    ] = "auto"
    stream: StreamSettings = msgspec.field(default_factory=StreamSettings)
    guard: GuardSettings = msgspec.field(default_factory=GuardSettings)


def _check(settings: CollectorSettings) -> Sequence[Problem]:
    out: list[Problem] = []
    stream = settings.stream
    if not settings.node_name.strip():
        out.append(Problem("nodeName", "empty; pass --node-name or set NODE_NAME"))
    if stream.backoff_initial > stream.backoff_max:
        out.append(Problem("stream.backoffInitial", f"{stream.backoff_initial:g} is above backoffMax"))
    for address in stream.analyzers:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            out.append(Problem("stream.analyzers", f"{address!r} is not host:port (e.g. analyzer.example:9876)"))
    if stream.enabled and not stream.analyzers:
        out.append(
            Problem("stream.analyzers", "no analyzer address: pass --stream-analyzers HOST:9876 or --no-stream-enabled")
        )
    if (stream.tls_cert is None) != (stream.tls_key is None):
        out.append(Problem("stream.tlsCert", "tlsCert and tlsKey go together (the client certificate and its key)"))
    if stream.enabled and stream.cert_renewal and stream.tls_cert is not None and stream.tls_ca is None:
        out.append(
            Problem(
                "stream.certRenewal",
                "renewing the client certificate needs stream.tlsCa (the trust bundle its renewal is checked "
                "against); set tlsCa, or certRenewal: false",
            )
        )
    guard = settings.guard
    pods = stream.enabled and stream.analyzers
    if guard.mode != "off" and not pods and not (settings.online_cgroups and settings.offline_cgroups):
        out.append(
            Problem(
                "guard.mode",
                f"{guard.mode} needs onlineCgroups (whose pressure it watches) and offlineCgroups (it limits), "
                "or analyzers to stream to (they name the node's online and offline pods)",
            )
        )
    if not guard.resources:
        out.append(Problem("guard.resources", "empty; expected some of cpu, memory, io"))
    try:
        guard.rules.rules()
    except ConfigError as exc:
        out.append(Problem("guard.rules", str(exc)))
    out += settings.metrics_web.problems("metricsWeb")
    return out


#: The snake_case keys of releases up to 0.x, read with a warning naming the camelCase key.
_RENAMED = {
    "stream": "stream.enabled",
    "guard": "guard.mode",
    "node_name": "nodeName",
    "interval_s": "interval",
    "proc_root": "procRoot",
    "sys_root": "sysRoot",
    "tracefs_root": "tracefsRoot",
    "metrics_host": "metricsHost",
    "metrics_port": "metricsPort",
    "bio_backend": "bioBackend",
    "bio_min_events": "bioMinEvents",
    "bpf_dir": "bpfDir",
    "log_level": "logLevel",
    "analyzers": "stream.analyzers",
    "buffer_samples": "stream.bufferSamples",
    "flush_interval_s": "stream.flushInterval",
    "backoff_initial_s": "stream.backoffInitial",
    "backoff_max_s": "stream.backoffMax",
    "keepalive_time_ms": "stream.keepaliveTimeMs",
    "tls_ca": "stream.tlsCa",
    "tls_cert": "stream.tlsCert",
    "tls_key": "stream.tlsKey",
    "tls_server_name": "stream.tlsServerName",
    "token_file": "stream.tokenFile",
    "cgroup_root": "cgroupRoot",
    "online_cgroups": "onlineCgroups",
    "offline_cgroups": "offlineCgroups",
    "kubelet_cgroup_driver": "kubeletCgroupDriver",
    "guard_interval_s": "guard.interval",
    "guard_journal": "guard.journal",
    "guard_resources": "guard.resources",
    "guard_rules": "guard.rules",
    **{
        f"guard.rules.{field.name}": f"guard.rules.{field.encode_name}"
        for field in msgspec.structs.fields(GuardRuleSettings)
        if field.name != field.encode_name
    },
}


def credential_files(settings: CollectorSettings) -> list[CredentialFile]:
    """The credentials the collector loads whose expiry it exposes: its /metrics port's (``metricsWeb.tls``)
    and its streams'."""
    stream = settings.stream
    out = settings.metrics_web.credential_files("metrics")
    if not stream.enabled:
        return out
    if stream.tls_cert is not None:
        out.append(CredentialFile("grpc_certificate", "certificate", stream.tls_cert))
    if stream.tls_ca is not None:
        out.append(CredentialFile("grpc_ca", "bundle", stream.tls_ca))
    return out


SPEC = Spec(
    service="collector",
    settings=CollectorSettings,
    check=_check,
    renamed=_RENAMED,
    renamed_flags={
        "--analyzer": "--stream-analyzers",
        "--no-stream": "--no-stream-enabled",
        "--buffer-samples": "--stream-buffer-samples",
        "--flush-interval": "--stream-flush-interval",
        "--tls-ca": "--stream-tls-ca",
        "--tls-cert": "--stream-tls-cert",
        "--tls-key": "--stream-tls-key",
        "--tls-server-name": "--stream-tls-server-name",
        "--token-file": "--stream-token-file",
    },
    env_aliases={"NODE_NAME": "nodeName"},
    reference="docs/collector.md#settings",
)
