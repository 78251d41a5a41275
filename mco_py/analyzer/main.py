"""``mco analyzer``: read settings, wire the parts, run until SIGTERM.

Settings come from built-in defaults, then the YAML config file (``--config``, keys in
camelCase, e.g. ``reportInterval: 5``, or snake_case, ``report_interval: 5``), then
command-line flags (highest precedence).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import logging
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from mco_py.analysis.guard import GuardChange, change_text
from mco_py.analysis.rules import default_rules
from mco_py.analyzer.engine import Engine
from mco_py.analyzer.metrics import AnalyzerMetrics
from mco_py.analyzer.rules_watch import FileRulesSource, RulesSource, RulesWatcher
from mco_py.analyzer.service import DEFAULT_MAX_MESSAGE_BYTES, TLSFiles, create_server, load_token
from mco_py.analyzer.workloads import WorkloadIndex
from mco_py.analyzer.writer import ReportLoop
from mco_py.errors import ConfigError
from mco_py.kube.client import load_api_client
from mco_py.kube.events import NodeEvents
from mco_py.kube.lease import LeaseElector
from mco_py.kube.rules import ConfigMapRulesSource
from mco_py.obs import process
from mco_py.obs.logging import setup_logging
from mco_py.obs.metrics import serve_metrics
from mco_py.obs.shutdown import stop_on_signals, wait_for_stop
from mco_py.report.size import DEFAULT_STATUS_BUDGET
from mco_py.store.base import ReportStore
from mco_py.store.file import FileReportStore
from mco_py.store.kube import KubeReportStore

log = logging.getLogger(__name__)

DEFAULT_CONFIG = Path("/etc/mco/analyzer.yaml")
MODES = ("standalone", "cluster")


@dataclass(frozen=True, slots=True)
class Settings:
    """Every analyzer setting; the config-file key is the field name or its camelCase."""

    mode: str = "standalone"
    """``standalone`` (file report, file rules, always leader) or ``cluster`` (CR, ConfigMap, Lease)."""
    report_file: str = "/var/lib/mco/report.json"
    """Standalone: where the report document is written."""
    report_name: str = "cluster"
    """Cluster: name of the NodeInterferenceReport object."""
    rules_file: str = "/etc/mco/rules.yaml"
    """Standalone: detection rules file (missing: built-in defaults, with a warning)."""
    rules_configmap: str = "mco-detection-rules"
    """Cluster: ConfigMap holding the rules under key ``rules.yaml``."""
    namespace: str = "mco-system"
    """Cluster: namespace of the rules ConfigMap and the Lease."""
    rules_interval: float = 30.0
    """Seconds between rules reloads."""
    kubeconfig: str = ""
    """Cluster: kubeconfig path (empty: in-cluster, then $KUBECONFIG)."""
    listen: str = ":9876"
    """gRPC address for collector streams (``:9876`` means every interface)."""
    metrics_host: str = "0.0.0.0"  # noqa: S104 - Prometheus scrapes from other hosts
    """Address of the /metrics endpoint."""
    metrics_port: int = 9878
    """Port of the /metrics endpoint."""
    report_interval: float = 5.0
    """Seconds between reports (written even when nothing changed)."""
    report_min_interval: float = 1.0
    """After a node's level changed the next report is written this long after the previous one
    rather than a whole reportInterval later (0: only every reportInterval)."""
    identity: str = ""
    """This replica's name in the report and the Lease (default: host name)."""
    lease_name: str = "mco-analyzer"
    """Cluster: Lease used to elect the one writer."""
    lease_duration: float = 15.0
    """Cluster: leaseDurationSeconds; a follower takes over within about this long."""
    tls_cert: str = ""
    """Server certificate (PEM); with tlsKey turns TLS on."""
    tls_key: str = ""
    """Server private key (PEM)."""
    tls_ca: str = ""
    """CA (PEM) for client certificates; turns on mTLS and per-node authorization."""
    token_file: str = ""
    """File with the bearer token collectors must send (empty: no token check)."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """Largest SampleBatch accepted."""
    max_report_bytes: int = DEFAULT_STATUS_BUDGET
    """Cluster: size budget of the report status (etcd limit 1.5 MiB); 0 disables the check."""
    report_shards: bool = True
    """Cluster: a report over ``max_report_bytes`` is split into NodeInterferenceReportShard objects,
    every node in full; false: one object, detail stripped (then nodes left out) to fit."""
    shard_refresh: float = 60.0
    """Cluster, sharded report: each shard is rewritten whole this often (seconds); level changes
    go into the report object meanwhile."""
    max_nodes: int = 65536
    """Most nodes tracked at once; samples for more are rejected."""
    max_clock_skew: float = 10.0
    """Samples further ahead of the analyzer's clock are rejected (seconds). Kept small: a sample
    from the future makes the node's real samples out of order until that time."""
    max_sample_age: float = 300.0
    """Samples older than this are rejected (seconds)."""
    log_level: str = "info"
    """debug, info, warning or error."""
    guard_pods: bool = False
    """Cluster: watch Pods and tell each collector's node guard its node's online and offline pods,
    and post the guards' limit changes as Events on Nodes (needs the RBAC ``mco_guard_pods`` adds)."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


_FIELDS = {f.name: f for f in fields(Settings)}
#: Config-file keys: camelCase (``reportInterval``) or the field name (``report_interval``, as the collector).
_KEYS = {_camel(name): name for name in _FIELDS} | {name: name for name in _FIELDS}
_KEYS["rulesConfigMap"] = "rules_configmap"


def _coerce(name: str, value: object, where: str) -> Any:
    default = _FIELDS[name].default
    try:
        if isinstance(default, bool):
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise TypeError
        if isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise TypeError
            return int(value)
        if isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise TypeError
            return float(value)
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise TypeError
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"{where}: expected {type(default).__name__}, got {value!r}; see `mco analyzer --help`"
        ) from exc


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"config file {path}: cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path}: not valid YAML: {exc}") from exc
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise ConfigError(f"config file {path}: expected a mapping of settings, got {type(doc).__name__}")
    values: dict[str, Any] = {}
    for key, value in doc.items():
        name = _KEYS.get(str(key))
        if name is None:
            hint = difflib.get_close_matches(str(key), list(_KEYS), n=1)
            fix = f"did you mean {hint[0]!r}?" if hint else f"known keys: {', '.join(sorted(_KEYS))}"
            raise ConfigError(f"config file {path}: unknown key {key!r}; {fix}")
        values[name] = _coerce(name, value, f"config file {path}: {key}")
    return values


def load_settings(args: argparse.Namespace) -> Settings:
    """Defaults, overlaid by the config file, overlaid by flags given on the command line."""
    config: Path | None = getattr(args, "config", None)
    path = config or DEFAULT_CONFIG
    values = _read_config_file(path) if config is not None or path.exists() else {}
    for name in _FIELDS:
        flag = getattr(args, name, None)
        if flag is not None:
            values[name] = _coerce(name, flag, f"--{name.replace('_', '-')}")
    settings = Settings(**values)
    if settings.mode not in MODES:
        raise ConfigError(f"mode {settings.mode!r} is not one of {', '.join(MODES)}")
    if bool(settings.tls_cert) != bool(settings.tls_key):
        raise ConfigError("TLS needs both tlsCert and tlsKey (--tls-cert, --tls-key)")
    if settings.tls_ca and not settings.tls_cert:
        raise ConfigError("mTLS (tlsCa) needs the server certificate too: set tlsCert and tlsKey")
    for name in ("report_interval", "rules_interval", "lease_duration", "shard_refresh"):
        if getattr(settings, name) <= 0:
            raise ConfigError(f"{_camel(name)} must be positive, got {getattr(settings, name)}")
    if settings.report_min_interval < 0:
        raise ConfigError(f"reportMinInterval must be 0 or more, got {settings.report_min_interval}")
    if not settings.identity:
        settings = dataclasses.replace(settings, identity=socket.gethostname())
    return settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``mco analyzer`` (each also settable in the config file)."""
    parser.add_argument("--config", type=Path, help=f"YAML settings file (default {DEFAULT_CONFIG} if present)")
    parser.add_argument("--mode", choices=MODES, help="standalone (default) or cluster")
    parser.add_argument("--report-file", dest="report_file", help="standalone report path")
    parser.add_argument("--report-name", dest="report_name", help="cluster: NodeInterferenceReport name")
    parser.add_argument("--rules-file", dest="rules_file", help="standalone rules file")
    parser.add_argument("--rules-configmap", dest="rules_configmap", help="cluster: rules ConfigMap name")
    parser.add_argument("--namespace", help="cluster: namespace of the rules ConfigMap and the Lease")
    parser.add_argument("--rules-interval", dest="rules_interval", type=float, help="seconds between rules reloads")
    parser.add_argument("--kubeconfig", help="cluster: kubeconfig path")
    parser.add_argument("--listen", help="gRPC address, e.g. :9876 or 127.0.0.1:0")
    parser.add_argument("--metrics-host", dest="metrics_host", help="metrics address")
    parser.add_argument("--metrics-port", dest="metrics_port", type=int, help="metrics port (0: any free port)")
    parser.add_argument("--report-interval", dest="report_interval", type=float, help="seconds between reports")
    parser.add_argument(
        "--report-min-interval",
        dest="report_min_interval",
        type=float,
        help="after a level change, report this long after the previous report (default 1; 0: no early reports)",
    )
    parser.add_argument("--identity", help="replica name (default host name)")
    parser.add_argument("--lease-name", dest="lease_name", help="cluster: leader-election Lease name")
    parser.add_argument("--lease-duration", dest="lease_duration", type=float, help="cluster: lease seconds")
    parser.add_argument("--tls-cert", dest="tls_cert", help="server certificate (PEM)")
    parser.add_argument("--tls-key", dest="tls_key", help="server key (PEM)")
    parser.add_argument("--tls-ca", dest="tls_ca", help="client CA (PEM): requires client certificates (mTLS)")
    parser.add_argument("--token-file", dest="token_file", help="bearer token file collectors must match")
    parser.add_argument("--max-message-bytes", dest="max_message_bytes", type=int, help="largest SampleBatch")
    parser.add_argument(
        "--max-report-bytes", dest="max_report_bytes", type=int, help="cluster: status size budget (0: none)"
    )
    parser.add_argument(
        "--no-report-shards",
        dest="report_shards",
        action="store_const",
        const=False,
        help="cluster: never shard the report; strip detail and leave nodes out to fit one object",
    )
    parser.add_argument(
        "--shard-refresh", dest="shard_refresh", type=float, help="cluster: seconds between whole shard writes"
    )
    parser.add_argument("--max-nodes", dest="max_nodes", type=int, help="most nodes tracked (default 65536)")
    parser.add_argument("--max-clock-skew", dest="max_clock_skew", type=float, help="seconds ahead allowed")
    parser.add_argument("--max-sample-age", dest="max_sample_age", type=float, help="oldest sample accepted (s)")
    parser.add_argument("--log-level", dest="log_level", choices=("debug", "info", "warning", "error"))
    parser.add_argument(
        "--guard-pods",
        dest="guard_pods",
        action="store_const",
        const=True,
        help="cluster: tell node guards their pods' classes and post their changes as Node Events",
    )


def log_change(change: GuardChange) -> None:
    """Standalone: a guard's limit change as a log line (there is no Node to post an Event on)."""
    reason, message = change_text(change)
    log.info("node %s: %s", change.node, message, extra={"node": change.node, "reason": reason})


def _grpc_address(listen: str) -> str:
    return f"[::]{listen}" if listen.startswith(":") else listen


class _Parts:
    """What ``run`` started, so it can be stopped in reverse order."""

    def __init__(self) -> None:
        self.stops: list[Callable[[], None]] = []
        self.guard: tuple[WorkloadIndex | None, Callable[[GuardChange], None]] = (None, log_change)
        """Pods for the collectors' guards, and where their changes go (cluster: Node Events)."""

    def stop_all(self) -> None:
        for stop in reversed(self.stops):
            try:
                stop()
            except Exception:
                log.exception("error while stopping")


def _cluster_parts(
    settings: Settings, engine: Engine, parts: _Parts
) -> tuple[ReportStore, RulesSource, Callable[[], bool]]:
    api = load_api_client(settings.kubeconfig or None)
    store = KubeReportStore(api, name=settings.report_name)
    source = ConfigMapRulesSource(
        api, name=settings.rules_configmap, namespace=settings.namespace, instance=settings.identity
    )
    elector = LeaseElector(
        api,
        identity=settings.identity,
        name=settings.lease_name,
        namespace=settings.namespace,
        lease_duration=settings.lease_duration,
        on_change=lambda leader: engine.metrics.leader.set(1 if leader else 0),
    )
    elector.try_acquire_or_renew()
    elector.start()
    parts.stops.append(elector.stop)
    if settings.guard_pods:
        index = WorkloadIndex(lambda: engine.rules.workloads)
        index.watch(api)
        parts.stops.append(index.stop)
        events = NodeEvents(
            api,
            instance=settings.identity,
            is_leader=lambda: elector.is_leader,
            on_result=lambda result: engine.metrics.guard_events.labels(result).inc(),
        )
        events.start()
        parts.stops.append(events.stop)
        parts.guard = (index, events.post)
    return store, source, lambda: elector.is_leader


def serve(settings: Settings, *, registry: CollectorRegistry, stop: threading.Event) -> int:
    """Run the analyzer until ``stop`` is set."""
    metrics = AnalyzerMetrics(registry)
    budget = settings.max_report_bytes if settings.mode == "cluster" else 0
    engine = Engine(
        default_rules(),
        metrics=metrics,
        identity=settings.identity,
        max_future_seconds=settings.max_clock_skew,
        max_age_seconds=settings.max_sample_age,
        status_budget=budget or None,
        shard_refresh_seconds=settings.shard_refresh if settings.report_shards else None,
        max_nodes=settings.max_nodes,
    )
    parts = _Parts()
    try:
        metrics_server = serve_metrics(registry, host=settings.metrics_host, port=settings.metrics_port)
        metrics_port = metrics_server.port
        parts.stops.append(metrics_server.stop)
        store: ReportStore
        source: RulesSource
        if settings.mode == "cluster":
            store, source, is_leader = _cluster_parts(settings, engine, parts)
        else:
            store = FileReportStore(settings.report_file, name=settings.report_name)
            source = FileRulesSource(settings.rules_file)
            metrics.leader.set(1)

            def is_leader() -> bool:
                return True

        watcher = RulesWatcher(source, engine, interval=settings.rules_interval)
        watcher.reload()
        watcher.start()
        parts.stops.append(watcher.stop)
        tls = (
            TLSFiles(
                Path(settings.tls_cert), Path(settings.tls_key), Path(settings.tls_ca) if settings.tls_ca else None
            )
            if settings.tls_cert
            else None
        )
        token = load_token(Path(settings.token_file)) if settings.token_file else None
        server, port = create_server(
            engine,
            listen=_grpc_address(settings.listen),
            tls=tls,
            token=token,
            max_message_bytes=settings.max_message_bytes,
            workloads=parts.guard[0],
            post_change=parts.guard[1],
        )
        parts.stops.append(server.stop)
        loop = ReportLoop(
            engine,
            store,
            interval=settings.report_interval,
            min_interval=settings.report_min_interval,
            is_leader=is_leader,
        )
        loop.start()
        parts.stops.append(loop.stop)
        log.info(
            "analyzer %s listening on port %d (%s, %s), metrics on port %d, report to %s, rules from %s",
            settings.identity,
            port,
            "mTLS" if tls and tls.ca else "TLS" if tls else "plaintext",
            "token" if token else "no token",
            metrics_port,
            store.describe(),
            source.describe(),
            extra={"grpc_port": port, "metrics_port": metrics_port, "mode": settings.mode},
        )
        wait_for_stop(stop)
        log.info("stopping")
    finally:
        parts.stop_all()
    return 0


def run(args: argparse.Namespace) -> int:
    """Entry point of ``mco analyzer``."""
    try:
        settings = load_settings(args)
    except ConfigError as exc:
        setup_logging("info")
        log.error("%s", exc)
        return 2
    setup_logging(settings.log_level)
    stop = threading.Event()
    stop_on_signals(stop)
    try:
        process.tune("analyzer")
        return serve(settings, registry=CollectorRegistry(), stop=stop)
    except ConfigError as exc:
        log.error("%s", exc)
        return 2
