"""``mco analyzer``: read settings (:mod:`mco_py.config.analyzer`), wire the parts, run until SIGTERM."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

import msgspec
from prometheus_client import CollectorRegistry

from mco_py.analysis.guard import GuardChange, change_text
from mco_py.analysis.rules import default_rules
from mco_py.analyzer.engine import Engine
from mco_py.analyzer.metrics import AnalyzerMetrics
from mco_py.analyzer.rules_watch import FileRulesSource, RulesSource, RulesWatcher
from mco_py.analyzer.service import TLSFiles, create_server, load_token
from mco_py.analyzer.workloads import WorkloadIndex
from mco_py.analyzer.writer import ReportLoop
from mco_py.config.analyzer import SPEC, AnalyzerSettings, credential_files
from mco_py.config.loader import Loaded, add_flags, load_with_args, settings_for_main
from mco_py.errors import ConfigError
from mco_py.kube.client import load_api_client
from mco_py.kube.events import NodeEvents
from mco_py.kube.lease import LeaseElector
from mco_py.kube.rules import ConfigMapRulesSource
from mco_py.kube.token import renew_in_background
from mco_py.obs import process
from mco_py.obs.credentials import CredentialExpiry
from mco_py.obs.metrics import serve_metrics
from mco_py.obs.pki import Signer, renew_own
from mco_py.obs.shutdown import stop_on_signals, wait_for_stop
from mco_py.store.base import ReportStore
from mco_py.store.file import FileReportStore
from mco_py.store.kube import KubeReportStore

log = logging.getLogger(__name__)

DEFAULT_CONFIG = Path("/etc/mco/analyzer.yaml")


def load_settings(args: argparse.Namespace, env: Mapping[str, str]) -> Loaded[AnalyzerSettings]:
    """Defaults < the config file < the environment < the flags; the identity defaults to the host name."""
    loaded = load_with_args(SPEC, args, default_file=DEFAULT_CONFIG, env=env)
    if loaded.settings.identity:
        return loaded
    return Loaded(msgspec.structs.replace(loaded.settings, identity=socket.gethostname()), loaded.notes)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``mco analyzer``: one per setting (docs/analyzer.md#settings)."""
    parser.add_argument("--config", type=Path, help=f"YAML settings file (default {DEFAULT_CONFIG} if present)")
    add_flags(parser, SPEC)


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
    settings: AnalyzerSettings, engine: Engine, parts: _Parts, credentials: CredentialExpiry
) -> tuple[ReportStore, RulesSource, Callable[[], bool]]:
    api = load_api_client(settings.kubeconfig or None)
    if settings.token_renewal and settings.kubeconfig:
        renewer = renew_in_background(
            api, Path(settings.kubeconfig), on_result=lambda result: credentials.count_renewal("kubeconfig", result)
        )
        if renewer is not None:
            parts.stops.append(renewer.stop)
    store = KubeReportStore(api, name=settings.report_name)
    source = ConfigMapRulesSource(
        api, name=settings.rules_config_map, namespace=settings.namespace, instance=settings.identity
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


def _renewal(settings: AnalyzerSettings, parts: _Parts, credentials: CredentialExpiry) -> Signer | None:
    """The signing CA, when configured; with certRenewal, a renewer for each of this analyzer's certificates."""
    if not settings.tls_signer_cert:
        return None
    signer = Signer(Path(settings.tls_signer_cert), Path(settings.tls_signer_key), term=settings.cert_term)
    if not settings.cert_renewal:
        log.warning("certRenewal is false: this analyzer's own certificates expire unless the controller reissues them")
        return signer
    own = [("grpc_certificate", Path(settings.tls_cert), Path(settings.tls_key))] if settings.tls_cert else []
    tls = settings.metrics_web.tls
    if tls.cert_file is not None and tls.key_file is not None:
        own.append(("metrics_certificate", tls.cert_file, tls.key_file))
    for renewer in renew_own(signer, own, renew_at=settings.cert_renew_at, on_result=credentials.count_renewal):
        parts.stops.append(renewer.stop)
    return signer


def serve(settings: AnalyzerSettings, *, registry: CollectorRegistry, stop: threading.Event) -> int:
    """Run the analyzer until ``stop`` is set."""
    metrics = AnalyzerMetrics(registry)
    credentials = CredentialExpiry("analyzer", credential_files(settings), registry=registry)
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
        web = settings.metrics_web.security("metricsWeb")
        metrics_server = serve_metrics(registry, host=settings.metrics_host, port=settings.metrics_port, security=web)
        metrics_port = metrics_server.port
        parts.stops.append(metrics_server.stop)
        log.log(web.log_level, "metrics on %s port %d: %s", web.scheme, metrics_port, web.describe())
        store: ReportStore
        source: RulesSource
        if settings.mode == "cluster":
            store, source, is_leader = _cluster_parts(settings, engine, parts, credentials)
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
        signer = _renewal(settings, parts, credentials)
        server, port = create_server(
            engine,
            listen=_grpc_address(settings.listen),
            tls=tls,
            token=token,
            max_message_bytes=settings.max_message_bytes,
            workloads=parts.guard[0],
            post_change=parts.guard[1],
            signer=signer,
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
    settings = settings_for_main("analyzer", lambda: load_settings(args, os.environ))
    if settings is None:
        return 2
    stop = threading.Event()
    stop_on_signals(stop)
    try:
        process.tune("analyzer")
        return serve(settings, registry=CollectorRegistry(), stop=stop)
    except ConfigError as exc:
        log.error("%s", exc)
        return 2
