"""``mco collector``: sample host signals, export them on /metrics, stream them to the analyzers."""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from mco_py.collector.biolatency import BACKENDS
from mco_py.collector.config import CollectorSettings, load_settings
from mco_py.collector.exporter import CollectorMetrics
from mco_py.collector.guard.files import detect_layout
from mco_py.collector.guard.loop import GuardLoop, NodeGuard
from mco_py.collector.guard.writer import LimitWriter
from mco_py.collector.sampler import SampleLoop, Sampler, open_sources, workload_groups
from mco_py.collector.signals import NodeSample
from mco_py.collector.workload_groups import WorkloadGroups
from mco_py.errors import ConfigError
from mco_py.obs import process
from mco_py.obs.http import RunningServer
from mco_py.obs.logging import setup_logging
from mco_py.obs.metrics import serve_metrics
from mco_py.obs.shutdown import stop_on_signals, wait_for_stop

if TYPE_CHECKING:
    from mco_py.collector.stream import StreamFanout

log = logging.getLogger(__name__)

#: gRPC experiments the collector turns off unless ``GRPC_EXPERIMENTS`` is set (see ``Collector``).
GRPC_EXPERIMENTS = "-event_engine_client"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``mco collector`` (each overrides the config file and the environment)."""
    add = parser.add_argument
    add("--config", type=Path, help="YAML settings file (keys as the flags, with underscores)")
    add("--node-name", dest="node_name", help="node name (env NODE_NAME; default: host name)")
    add("--interval", dest="interval_s", type=float, help="sample interval in seconds (default 1)")
    add("--proc-root", dest="proc_root", type=Path, help="procfs root (default /proc)")
    add("--sys-root", dest="sys_root", type=Path, help="sysfs root (default /sys)")
    add("--tracefs-root", dest="tracefs_root", type=Path, help="tracefs mount point (default /sys/kernel/tracing)")
    add("--metrics-host", dest="metrics_host", help="address of /metrics (default 0.0.0.0)")
    add("--metrics-port", dest="metrics_port", type=int, help="port of /metrics (default 9877; 0 = any free)")
    add("--bio-backend", dest="bio_backend", choices=BACKENDS, help="block latency backend (default auto)")
    add("--bio-min-events", dest="bio_min_events", type=int, help="fewest block I/Os for a P99 (default 20)")
    add("--bpf-dir", dest="bpf_dir", type=Path, help="directory with biolatency.bpf.o")
    add("--llc", choices=("auto", "off"), help="LLC miss rate from perf counters (default auto)")
    add("--resctrl", choices=("auto", "off"), help="resctrl extras (default auto)")
    add("--analyzer", dest="analyzers", action="append", metavar="HOST:PORT", help="analyzer address (repeatable)")
    add("--no-stream", dest="stream", action="store_const", const=False, help="exporter only, no gRPC stream")
    add("--buffer-samples", dest="buffer_samples", type=int, help="send buffer per analyzer (default 600)")
    add(
        "--flush-interval",
        dest="flush_interval_s",
        type=float,
        help="send to the analyzers at most every N seconds, all samples batched (default 5; 0 = each at once)",
    )
    add("--tls-ca", dest="tls_ca", type=Path, help="CA bundle (enables TLS)")
    add("--tls-cert", dest="tls_cert", type=Path, help="client certificate (mTLS)")
    add("--tls-key", dest="tls_key", type=Path, help="client key (mTLS)")
    add("--tls-server-name", dest="tls_server_name", help="server name to verify")
    add("--token-file", dest="token_file", type=Path, help="file with the shared bearer token")
    add("--log-level", dest="log_level", choices=("debug", "info", "warning", "error"))
    add("--once", action="store_true", help="take one sample (two readings one interval apart), print it, exit")
    add(
        "--restore-guard",
        action="store_true",
        help="write back the CPU limits a killed node guard left (its guard_journal), then exit",
    )
    add("-o", "--output", choices=("json", "text"), default="text", help="--once output format")


_FLAG_KEYS = [
    "node_name",
    "interval_s",
    "proc_root",
    "sys_root",
    "tracefs_root",
    "metrics_host",
    "metrics_port",
    "bio_backend",
    "bio_min_events",
    "bpf_dir",
    "llc",
    "resctrl",
    "analyzers",
    "stream",
    "buffer_samples",
    "flush_interval_s",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "tls_server_name",
    "token_file",
    "log_level",
]


def settings_from_args(args: argparse.Namespace, env: dict[str, str]) -> CollectorSettings:
    """Merge the config file, the environment and the flags."""
    file_text = None
    if args.config is not None:
        try:
            file_text = args.config.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--config {args.config}: cannot read ({exc.strerror or exc})") from exc
    flags: dict[str, Any] = {k: getattr(args, k, None) for k in _FLAG_KEYS}
    if args.once:
        flags["stream"] = False
    return load_settings(file_text=file_text, file_name=str(args.config or "config"), env=env, flags=flags)


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
    try:
        settings = settings_from_args(args, dict(os.environ))
    except ConfigError as exc:
        print(f"mco collector: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings.log_level)
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
            return run_once(sampler, settings.interval_s, args.output, stop)
        process.tune("collector")
        return serve(settings, sampler, stop, groups=groups)
    except ConfigError as exc:
        print(f"mco collector: {exc}", file=sys.stderr)
        return 2
    finally:
        sampler.close()


def restore_guard(settings: CollectorSettings) -> int:
    """``--restore-guard``: what the guard's journal recorded, written back (0: done or nothing to do)."""
    if not settings.guard_journal.exists():
        print(f"no guard journal at {settings.guard_journal}: nothing to restore")
        return 0
    try:
        writer = LimitWriter.at(settings.cgroup_root, settings.guard_journal)
    except ConfigError as exc:
        print(f"mco collector: {exc}", file=sys.stderr)
        return 1
    problems = writer.restore()
    for problem in problems:
        print(f"mco collector: {problem}", file=sys.stderr)
    if not problems:
        print(f"restored the CPU limits recorded in {settings.guard_journal}")
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
        self.loop = SampleLoop(sampler, interval_s=settings.interval_s, stop=stop)
        self.guard: GuardLoop | None = None
        if settings.guard != "off":
            layout = detect_layout(settings.cgroup_root)
            guard = NodeGuard(
                layout,
                groups=groups or workload_groups(settings),
                rules=settings.guard_rules,
                mode=settings.guard,
                journal_path=settings.guard_journal,
                node=settings.node_name,
                resources=settings.guard_resources,
            )
            self.guard = GuardLoop(guard, settings.guard_interval_s)
        elif settings.guard_journal.exists():  # a guard was killed, then switched off: undo its limits anyway
            problems = LimitWriter.at(settings.cgroup_root, settings.guard_journal).restore()
            if problems:
                log.error("cannot restore the CPU limits a killed guard left: %s", "; ".join(problems))
            else:
                log.warning("restored the CPU limits a killed guard left (%s)", settings.guard_journal)
        self.fanout: StreamFanout | None = None
        if settings.stream:
            # grpc is imported only when streaming: an exporter-only collector stays smaller without it.
            # gRPC's EventEngine client keeps four threads waking many times a second (a large share of
            # the collector's CPU at a 1 s interval: docs/collector.md); the long-standing iomgr client
            # does not. Set GRPC_EXPERIMENTS yourself to choose otherwise (read once, when grpc is first
            # imported).
            os.environ.setdefault("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS)
            from mco_py.collector.stream import StreamFanout, apply_guard_control  # noqa: PLC0415

            g = self.guard.guard if self.guard else None
            self.fanout = StreamFanout(
                settings.stream_config(),
                collector_id=settings.node_name,
                on_set_interval=self.loop.set_interval,
                on_guard=functools.partial(apply_guard_control, g) if g else None,
                guard_changes=g.take_changes if g else None,
            )
            self.loop.publish = self.fanout.publish
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
        self._server = serve_metrics(self.registry, host=self._settings.metrics_host, port=self._settings.metrics_port)
        self.port = self._server.port
        log.info("metrics on %s:%d/metrics", self._settings.metrics_host, self.port, extra={"port": self.port})
        if self.fanout is not None:
            self.fanout.start()
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
