"""Run a real control plane on this host until SIGTERM/SIGINT.

    .venv/bin/python -m tests.cluster --kubeconfig /tmp/kubeconfig [--volcano] [--kube-scheduler]
        [--nodes N] [--extender URL] [--controllers namespace,...] [--host ADDR] [--port N] [--workdir DIR]

Builds the binaries first if they are not cached (see tests/cluster/build.py). The admin
kubeconfig is written (atomically) once everything asked for is ready, so waiting for the
file is waiting for readiness; the work directory (etcd data, logs, keys) is removed on exit.
"""

from __future__ import annotations

import argparse
import ipaddress
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

from tests.cluster.build import BuildError, binaries, volcano_crds
from tests.cluster.cluster import (
    SERVICE_ACCOUNT_CONTROLLERS,
    ClusterError,
    RealCluster,
    extender_config,
    remove_workdir,
    volcano_conf,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cluster", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True, help="where to write the admin kubeconfig once ready")
    parser.add_argument("--nodes", type=int, default=3, help="fake nodes to register (default 3)")
    parser.add_argument("--volcano", action="store_true", help="also run vc-controller-manager and vc-scheduler")
    parser.add_argument("--kube-scheduler", action="store_true", help="also run kube-scheduler")
    parser.add_argument(
        "--extender",
        metavar="URL",
        help="MCO extender base URL (e.g. http://127.0.0.1:9879): Volcano's extender plugin and kube-scheduler's "
        "extenders call it",
    )
    parser.add_argument(
        "--controllers",
        default="",
        metavar="NAMES",
        help="also run kube-controller-manager with these controllers, comma-separated (e.g. namespace)",
    )
    parser.add_argument(
        "--service-accounts",
        action="store_true",
        help="pods get their ServiceAccount token (admission plugin ServiceAccount; kube-controller-manager runs "
        f"{' and '.join(SERVICE_ACCOUNT_CONTROLLERS)} besides --controllers): for kubelet nodes",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address the API server listens on and is reached at (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=0, help="the API server's port (default: a free one)")
    parser.add_argument("--workdir", type=Path, help="work directory (default: a new temporary one)")
    args = parser.parse_args(argv)
    if args.nodes < 0:
        parser.error("--nodes must be 0 or more")
    if not 0 <= args.port < 65536:
        parser.error("--port must be 1-65535 (or 0 for a free one)")
    try:
        ipaddress.ip_address(args.host)
    except ValueError:
        parser.error(f"--host must be an IP address (the API server's certificate names it), got {args.host!r}")
    controllers = [name for name in args.controllers.split(",") if name]
    if args.service_accounts:
        controllers += [name for name in SERVICE_ACCOUNT_CONTROLLERS if name not in controllers]
    try:
        bins = binaries()
    except BuildError as exc:
        print(f"cluster: {exc}", file=sys.stderr)
        return 1
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mco-cluster-"))
    cluster = RealCluster(
        workdir,
        bins,
        crds=volcano_crds(bins),
        host=args.host,
        api_port=args.port,
        pod_service_accounts=args.service_accounts,
    )
    done = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        cluster.start(
            nodes=args.nodes,
            volcano=args.volcano,
            volcano_conf=volcano_conf(args.extender) if args.extender else None,
            kube_scheduler=args.kube_scheduler,
            scheduler_config=extender_config(args.extender) if args.extender else None,
            controllers=controllers,
        )
    except ClusterError as exc:
        print(f"cluster: {exc}", file=sys.stderr)
        remove_workdir(workdir)
        return 1
    shutil.copy(cluster.admin_kubeconfig, f"{args.kubeconfig}.tmp")
    Path(f"{args.kubeconfig}.tmp").replace(args.kubeconfig)
    parts = (
        ["etcd", "kube-apiserver"]
        + (["volcano"] if args.volcano else [])
        + (["kube-scheduler"] * args.kube_scheduler)
        + ([f"kube-controller-manager ({', '.join(controllers)})"] if controllers else [])
    )
    print(f"cluster: serving {cluster.url} ({', '.join(parts)}; kubeconfig {args.kubeconfig})", flush=True)
    done.wait()
    cluster.stop()
    remove_workdir(workdir)
    print("cluster: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
