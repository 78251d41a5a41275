"""``mco extender``: the scheduler extender ("mco-plugin") for Volcano and kube-scheduler.

Only reads configuration and wires parts; see :mod:`mco_py.extender.app` for
the behaviour and ``docs/extender.md`` for the routes and settings.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry

from mco_py.errors import ConfigError
from mco_py.extender.app import ExtenderApp
from mco_py.extender.config import DEFAULT_PATH, ExtenderConfig, load_config, with_overrides
from mco_py.extender.source import FileReportSource, NodeLabelCache, NoLabels, WatchReportSource
from mco_py.extender.wire import MsgspecDecoder
from mco_py.model import GROUP, PLURAL, VERSION
from mco_py.obs import process
from mco_py.obs.http import serve_forever
from mco_py.obs.logging import setup_logging
from mco_py.report.shards import REPORT_LABEL, SHARD_PLURAL

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=None, help=f"config file (default {DEFAULT_PATH}, optional)")
    parser.add_argument("--mode", choices=("standalone", "cluster"), default=None, help="report source")
    parser.add_argument("--report-file", default=None, help="standalone report file")
    parser.add_argument("--kubeconfig", default=None, help="cluster mode kubeconfig")
    parser.add_argument("--cr-name", default=None, help="NodeInterferenceReport name (crName)")
    parser.add_argument("--listen", default=None, help="[host]:port, e.g. :9879 (port 0 = any free port)")
    parser.add_argument("--volcano-version", default=None, help="reply format of /volcano/<verb>: 1.9 or 1.10")
    parser.add_argument("--ttl-seconds", type=float, default=None, help="crStatusTTLSeconds")
    parser.add_argument("--score-weight", type=float, default=None, help="scoreWeight")
    parser.add_argument("--max-body-bytes", type=int, default=None, help="larger requests are answered fail-open")
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default=None)
    parser.add_argument("--no-uvloop", action="store_true", help="use the plain asyncio event loop")


def build_config(args: argparse.Namespace) -> ExtenderConfig:
    path: Path = args.config or DEFAULT_PATH
    cfg = load_config(path, required=args.config is not None)
    return with_overrides(
        cfg,
        {
            "mode": args.mode,
            "report_file": args.report_file,
            "kubeconfig": args.kubeconfig,
            "cr_name": args.cr_name,
            "listen": args.listen,
            "volcano_version": args.volcano_version,
            "ttl_seconds": args.ttl_seconds,
            "score_weight": args.score_weight,
            "max_body_bytes": args.max_body_bytes,
            "log_level": args.log_level,
        },
    )


def run(args: argparse.Namespace) -> int:
    try:
        cfg = build_config(args)
    except ConfigError as exc:
        print(f"mco extender: {exc}", file=sys.stderr)
        return 2
    setup_logging(cfg.log_level)
    for note in cfg.notes:
        log.warning("config: %s", note)

    labels: NodeLabelCache | NoLabels
    source: FileReportSource | WatchReportSource
    if cfg.mode == "cluster":
        from mco_py.kube.client import load_api_client  # noqa: PLC0415 - only cluster mode needs the client
        from mco_py.kube.watch import KubeListWatch  # noqa: PLC0415

        try:
            api = load_api_client(cfg.kubeconfig or None)
        except ConfigError as exc:
            print(f"mco extender: {exc}", file=sys.stderr)
            return 2
        source = WatchReportSource(
            KubeListWatch(api, f"/apis/{GROUP}/{VERSION}/{PLURAL}", field_selector=f"metadata.name={cfg.cr_name}"),
            name=cfg.cr_name,
            shards=KubeListWatch(
                api, f"/apis/{GROUP}/{VERSION}/{SHARD_PLURAL}", label_selector=f"{REPORT_LABEL}={cfg.cr_name}"
            ),
        )
        labels = NodeLabelCache(KubeListWatch(api, "/api/v1/nodes"))
    else:
        source = FileReportSource(cfg.report_file, recheck_seconds=0.05)  # one stat per 50 ms, not per request
        labels = NoLabels()

    app = ExtenderApp(
        policy=cfg.policy,
        source=source,
        labels=labels,
        decoder=MsgspecDecoder(),
        registry=CollectorRegistry(),
        volcano_version=cfg.volcano_version,
    )
    source.start()
    labels.start()

    def _listening(port: int) -> None:
        log.info(
            "extender listening",
            extra={
                "host": cfg.host,
                "port": port,
                "mode": cfg.mode,
                "source": source.describe(),
                "volcanoVersion": cfg.volcano_version,
                "mallocTuned": tuning.malloc_tuned,
                "heapTrim": tuning.trim is not None,
            },
        )

    tuning = process.tune("extender")
    try:
        serve_forever(
            app,
            cfg.host,
            cfg.port,
            max_body=cfg.max_body_bytes,
            limits=cfg.limits,
            on_listening=_listening,
            use_uvloop=not args.no_uvloop,
            trim_heap=tuning.trim,
            on_guard=app.metrics.watch_connections,
        )
    except OSError as exc:
        log.error("cannot listen", extra={"host": cfg.host, "port": cfg.port, "error": str(exc)})
        print(f"mco extender: cannot listen on {cfg.host}:{cfg.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        source.stop()
        labels.stop()
    log.info("extender stopped")
    return 0
