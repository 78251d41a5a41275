"""``mco collector``: sample host signals, export them on /metrics, stream them to the analyzers."""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from mco_py.collector.exporter import CollectorMetrics
from mco_py.collector.guard.files import detect_layout
from mco_py.collector.guard.loop import GuardLoop, NodeGuard
from mco_py.collector.guard.writer import LimitWriter
from mco_py.collector.renewal import finish_interrupted_renewal, renew_in_child
from mco_py.collector.sampler import SampleLoop, Sampler, open_sources, workload_groups
from mco_py.collector.signals import NodeSample
from mco_py.collector.workload_groups import WorkloadGroups
from mco_py.config.collector import SPEC, CollectorSettings, credential_files
from mco_py.config.loader import Loaded, add_flags, flag_values, load, read_document, settings_for_main
from mco_py.errors import ConfigError
from mco_py.obs import process
from mco_py.obs.credentials import CredentialExpiry
from mco_py.obs.http import RunningServer
from mco_py.obs.metrics import serve_metrics
from mco_py.obs.renewal import CertRenewer, RenewalError
from mco_py.obs.shutdown import stop_on_signals, wait_for_stop

if TYPE_CHECKING:
    from mco_py.collector.stream import StreamFanout

log = logging.getLogger(__name__)

#: gRPC experiments the collector turns off unless ``GRPC_EXPERIMENTS`` is set (see ``Collector``).
GRPC_EXPERIMENTS = "-event_engine_client"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``mco collector``: one per setting (docs/collector.md#settings), and the actions."""
    add = parser.add_argument
    add("--config", type=Path, help="YAML settings file (keys in camelCase; docs/collector.md#settings)")
    add_flags(parser, SPEC)
    add("--once", action="store_true", help="take one sample (two readings one interval apart), print it, exit")
    add(
        "--restore-guard",
        action="store_true",
        help="write back the limits a killed node guard left (its guard.journal), then exit",
    )
    add("-o", "--output", choices=("json", "text"), default="text", help="--once output format")


def settings_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> Loaded[CollectorSettings]:
    """The config file (only when --config names one), the environment and the flags."""
    document = read_document(args.config, required=True) if args.config is not None else None
    flags, notes = flag_values(args)
    if args.once:
        flags["stream.enabled"] = False
    source = str(args.config) if args.config is not None else "settings"
    return load(SPEC, document=document, source=source, env=env, flags=flags, flag_notes=notes)


def format_text(sample: NodeSample) -> str:
    """Human-readable one-sample listing."""
    lines = [f"node {sample.node}  interval {sample.interval:.3f}s"]
    lines += [f"backend {group}: {backend}" for group, backend in sorted(sample.backends.items())]
    for r in sample.readings:
        label = r.name + (f"[{r.device}]" if r.device else "")
        events = f" events={r.events}" if r.events is not None else ""
        if r.value is not None:
            lines.append(f"{label:40} {r.value:12.4f}  ({r.backend}{events})")
        else:
            kind = r.absence.value if r.absence else "?"
            lines.append(f"{label:40} {'absent':>12}  ({r.backend}{events}) {kind}: {r.reason}")
    return "\n".join(lines)


def run_once(sampler: Sampler, interval_s: float, output: str, stop: threading.Event) -> int:
    """Two readings ``interval_s`` apart; print the second."""
    sampler.sample()
    stop.wait(interval_s)
    sample = sampler.sample()
    if output == "json":
        print(json.dumps(sample.as_dict(), indent=2, sort_keys=True))
    else:
        print(format_text(sample))
    return 0


def run(args: argparse.Namespace) -> int:
    """Entry point of ``mco collector``."""
    settings = settings_for_main("collector", lambda: settings_from_args(args, os.environ))
    if settings is None:
        return 2
    if args.restore_guard:
        return restore_guard(settings)
    stop = threading.Event()
    stop_on_signals(stop)
    try:
        groups = workload_groups(settings)
    except ConfigError as exc:
        print(f"mco collector: {exc}", file=sys.stderr)
        return 2
    sampler = Sampler(open_sources(settings, groups=groups), node=settings.node_name)
    log.info("collector backends: %s", sampler.backends, extra={"node": settings.node_name, **sampler.backends})
    try:
        if args.once:
            return run_once(sampler, settings.interval, args.output, stop)
        process.tune("collector")
        return serve(settings, sampler, stop, groups=groups)
    except ConfigError as exc:
        print(f"mco collector: {exc}", file=sys.stderr)
        return 2
    finally:
        sampler.close()


def restore_guard(settings: CollectorSettings) -> int:
    """``--restore-guard``: what the guard's journal recorded, written back (0: done or nothing to do)."""
    if not settings.guard.journal.exists():
        print(f"no guard journal at {settings.guard.journal}: nothing to restore")
        return 0
    try:
        writer = LimitWriter.at(settings.cgroup_root, settings.guard.journal)
    except ConfigError as exc:
        print(f"mco collector: {exc}", file=sys.stderr)
        return 1
    problems = writer.restore()
    for problem in problems:
        print(f"mco collector: {problem}", file=sys.stderr)
    if not problems:
        print(f"restored the CPU limits recorded in {settings.guard.journal}")
    return 1 if problems else 0


class CollectorDaemon:
    """Exporter + streams + sample loop, wired from settings; tests run it in-process on port 0."""

    def __init__(
        self,
        settings: CollectorSettings,
        sampler: Sampler,
        *,
        registry: CollectorRegistry | None = None,
        stop: threading.Event | None = None,
        groups: WorkloadGroups | None = None,
    ) -> None:
        self.registry = registry or CollectorRegistry()
        self.loop = SampleLoop(sampler, interval_s=settings.interval, stop=stop)
        self.guard: GuardLoop | None = None
        if settings.guard.mode != "off":
            layout = detect_layout(settings.cgroup_root)
            guard = NodeGuard(
                layout,
                groups=groups or workload_groups(settings),
                rules=settings.guard.rules.rules(),
                mode=settings.guard.mode,
                journal_path=settings.guard.journal,
                node=settings.node_name,
                resources=settings.guard.resources,
            )
            self.guard = GuardLoop(guard, settings.guard.interval)
        elif settings.guard.journal.exists():  # a guard was killed, then switched off: undo its limits anyway
            problems = LimitWriter.at(settings.cgroup_root, settings.guard.journal).restore()
            if problems:
                log.error("cannot restore the CPU limits a killed guard left: %s", "; ".join(problems))
            else:
                log.warning("restored the CPU limits a killed guard left (%s)", settings.guard.journal)
        self.fanout: StreamFanout | None = None
        if settings.stream.enabled and not settings.stream.cert_renewal and settings.stream.tls_cert is not None:
            log.warning(
                "stream.certRenewal is false: the client certificate %s expires unless the controller reissues it "
                "(playbooks/mco.yml)",
                settings.stream.tls_cert,
            )
        if settings.stream.enabled and settings.stream.cert_renewal:
            try:  # before the streams read the pair: a crash may have left the new key beside it
                if finish_interrupted_renewal(settings.stream):
                    log.info("finished an interrupted renewal of the client certificate: its new key is in place")
            except RenewalError as exc:
                log.warning("cannot finish an interrupted renewal of the client certificate: %s", exc)
        if settings.stream.enabled:
            # grpc is imported only when streaming: an exporter-only collector stays smaller without it.
            # gRPC's EventEngine client keeps four threads waking many times a second (a large share of
            # the collector's CPU at a 1 s interval: docs/collector.md); the long-standing iomgr client
            # does not. Set GRPC_EXPERIMENTS yourself to choose otherwise (read once, when grpc is first
            # imported).
            os.environ.setdefault("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS)
            from mco_py.collector.stream import StreamFanout, apply_guard_control  # noqa: PLC0415

            g = self.guard.guard if self.guard else None
            self.fanout = StreamFanout(
                settings.stream,
                collector_id=settings.node_name,
                on_set_interval=self.loop.set_interval,
                on_guard=functools.partial(apply_guard_control, g) if g else None,
                guard_changes=g.take_changes if g else None,
            )
            self.loop.publish = self.fanout.publish
        credentials = CredentialExpiry("collector", credential_files(settings), registry=self.registry)
        self.renewer: CertRenewer | None = None
        stream = settings.stream
        if stream.enabled and stream.cert_renewal and stream.tls_cert is not None:
            self.renewer = CertRenewer(
                "grpc_certificate",
                stream.tls_cert,
                lambda: log.info("client certificate renewed by analyzer %s", renew_in_child(stream)),
                renew_at=stream.cert_renew_at,
                on_result=lambda result: credentials.count_renewal("grpc_certificate", result),
            )
        self.loop.metrics = CollectorMetrics(
            self.registry,
            streams=self.fanout.statuses if self.fanout else None,
            extra=self.guard.guard.families if self.guard else None,
        )
        self._settings = settings
        self._server: RunningServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def start(self) -> None:
        """Serve /metrics, open the streams and start sampling in a thread."""
        security = self._settings.metrics_web.security("metricsWeb")
        self._server = serve_metrics(
            self.registry, host=self._settings.metrics_host, port=self._settings.metrics_port, security=security
        )
        self.port = self._server.port
        log.log(
            security.log_level,
            "metrics on %s:%d/metrics (%s: %s)",
            self._settings.metrics_host,
            self.port,
            security.scheme,
            security.describe(),
            extra={"port": self.port},
        )
        if self.fanout is not None:
            self.fanout.start()
        if self.renewer is not None:
            self.renewer.start()
        if self.guard is not None:
            self.guard.start()
        self._thread = threading.Thread(target=self.loop.run, name="sample-loop", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Block until the stop event is set (by a signal handler, which this wait lets run)."""
        wait_for_stop(self.loop.stop)

    def close(self) -> None:
        """Stop sampling, close the streams and the HTTP server (the caller closes the sampler)."""
        self.loop.stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.guard is not None:
            self.guard.stop()  # puts the offline limits back
        if self.renewer is not None:
            self.renewer.stop()
        if self.fanout is not None:
            self.fanout.close()
        if self._server is not None:
            self._server.stop()


def serve(
    settings: CollectorSettings, sampler: Sampler, stop: threading.Event, *, groups: WorkloadGroups | None = None
) -> int:
    """Run the daemon until ``stop`` (SIGTERM/SIGINT)."""
    daemon = CollectorDaemon(settings, sampler, stop=stop, groups=groups)
    try:
        daemon.start()
        daemon.wait()
    finally:
        daemon.close()
    log.info("collector stopped")
    return 0
