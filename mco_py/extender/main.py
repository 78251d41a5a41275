"""``mco extender``: the scheduler extender ("mco-plugin") for Volcano and kube-scheduler.

Only reads configuration and wires parts; see :mod:`mco_py.extender.app` for
the behaviour and ``docs/extender.md`` for the routes and settings.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from mco_py.config.extender import DEFAULT_PATH, SPEC, ExtenderSettings, credential_files
from mco_py.config.loader import Loaded, add_flags, load_with_args, settings_for_main
from mco_py.errors import ConfigError
from mco_py.extender.app import ExtenderApp
from mco_py.extender.source import FileReportSource, NodeLabelCache, NoLabels, WatchReportSource
from mco_py.extender.wire import MsgspecDecoder
from mco_py.model import GROUP, PLURAL, VERSION
from mco_py.obs import process
from mco_py.obs.credentials import CredentialExpiry
from mco_py.obs.http import ServerOptions, serve_forever
from mco_py.obs.renewal import CertRenewer, stop_all
from mco_py.report.shards import REPORT_LABEL, SHARD_PLURAL

if TYPE_CHECKING:
    from mco_py.kube.token import TokenRenewer

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``mco extender``: one per setting (docs/extender.md#settings), and the event loop's."""
    parser.add_argument("--config", type=Path, default=None, help=f"config file (default {DEFAULT_PATH}, optional)")
    add_flags(parser, SPEC)
    parser.add_argument("--no-uvloop", action="store_true", help="use the plain asyncio event loop")


def build_config(args: argparse.Namespace, env: Mapping[str, str]) -> Loaded[ExtenderSettings]:
    """Defaults < the config file < the environment < the flags."""
    return load_with_args(SPEC, args, default_file=DEFAULT_PATH, env=env)


def _credentials(cfg: ExtenderSettings) -> tuple[CollectorRegistry, CredentialExpiry, list[CertRenewer]]:
    """The service's metrics registry with its credentials' expiry gauges. The extender renews no
    certificate: it never holds a signing CA (its port's certificate is reissued by playbooks/mco.yml)."""
    registry = CollectorRegistry()
    credentials = CredentialExpiry("extender", credential_files(cfg), registry=registry)
    return registry, credentials, []


def run(args: argparse.Namespace) -> int:
    cfg = settings_for_main("extender", lambda: build_config(args, os.environ))
    if cfg is None:
        return 2
    host, port = cfg.address
    try:
        security = cfg.web.security("web")
        registry, credentials, renewers = _credentials(cfg)
    except ConfigError as exc:
        print(f"mco extender: {exc}", file=sys.stderr)
        return 2

    labels: NodeLabelCache | NoLabels
    source: FileReportSource | WatchReportSource
    renewer: TokenRenewer | None = None
    if cfg.mode == "cluster":
        from mco_py.kube.client import load_api_client  # noqa: PLC0415 - only cluster mode needs the client
        from mco_py.kube.token import renew_in_background  # noqa: PLC0415
        from mco_py.kube.watch import KubeListWatch  # noqa: PLC0415

        try:
            api = load_api_client(cfg.kubeconfig or None)
        except ConfigError as exc:
            print(f"mco extender: {exc}", file=sys.stderr)
            return 2
        if cfg.token_renewal and cfg.kubeconfig:
            renewer = renew_in_background(
                api, Path(cfg.kubeconfig), on_result=lambda result: credentials.count_renewal("kubeconfig", result)
            )
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
        registry=registry,
        volcano_version=cfg.volcano_reply,
    )
    source.start()
    labels.start()

    def _listening(port: int) -> None:
        log.info(
            "extender listening",
            extra={
                "host": host,
                "port": port,
                "mode": cfg.mode,
                "source": source.describe(),
                "volcanoVersion": cfg.volcano_reply,
                "mallocTuned": tuning.malloc_tuned,
                "heapTrim": tuning.trim is not None,
                "scheme": security.scheme,
            },
        )
        if security.insecure:
            log.warning(
                "extender port is INSECURE: plain HTTP, no authentication; set web.tls and/or web.basicAuthUsers "
                "(docs/security.md) where the schedulers can present credentials"
            )
        else:
            log.info("extender port: %s", security.describe())

    tuning = process.tune("extender")
    try:
        options = ServerOptions(
            max_body=cfg.max_body_bytes,
            limits=cfg.limits,
            trim_heap=tuning.trim,
            on_guard=app.metrics.watch_connections,
            security=security,
        )
        serve_forever(app, host, port, options, on_listening=_listening, use_uvloop=not args.no_uvloop)
    except OSError as exc:
        log.error("cannot listen", extra={"host": host, "port": port, "error": str(exc)})
        print(f"mco extender: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        source.stop()
        labels.stop()
        stop_all(renewers)
        if renewer is not None:
            renewer.stop()
    log.info("extender stopped")
    return 0
