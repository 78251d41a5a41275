"""``mco doctor``: check MCO on this host (or, with ``--cluster``, in the cluster), print a
verdict and a next step per check.

Exit code: the worst verdict (0 ok, 1 warn, 2 fail). ``--bundle FILE`` also writes a tarball
for a bug report: this run's checks, the parts' configuration files (secrets redacted),
/metrics snapshots and the tail of each log.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

from mco_py.doctor.checks import Check, PartView, Verdict, judge
from mco_py.doctor.cluster_view import NAMESPACE
from mco_py.doctor.probe import PARTS, probe_host, read_settings
from mco_py.errors import ConfigError, MCOError

DEFAULT_CONFIG_DIR = Path("/etc/mco")
DEFAULT_LOG_DIR = Path("/var/log/mco")
#: The extender's default crStatusTTLSeconds (docs/configuration.md).
DEFAULT_TTL_S = 30.0
#: Bytes of each log file's end put in a bundle.
LOG_TAIL_BYTES = 1024 * 1024
#: ``key: value`` (or ``key=value``, a list item, a quoted key) lines whose key names a secret
#: (``token``, ``password``, ``secret``).
_SECRET_LINE = re.compile(
    r"(?mi)^(\s*(?:-\s+)?[\"']?[\w.-]*(?:token|password|secret)[\w.-]*[\"']?\s*[:=][ \t]*)(\S.*)$"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument(
        "--config-dir", type=Path, default=DEFAULT_CONFIG_DIR, help="where the parts' YAML files are (/etc/mco)"
    )
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for each local endpoint")
    parser.add_argument("--bundle", type=Path, help="also write a .tar.gz for a bug report (secrets redacted)")
    parser.add_argument("--log-dir", type=Path, default=DEFAULT_LOG_DIR, help="logs put in the bundle (/var/log/mco)")
    cluster = parser.add_argument_group("cluster checks")
    cluster.add_argument(
        "--cluster",
        action="store_true",
        help="check the cluster instead of this host: report, analyzer leader, Volcano's extender entry, "
        "Kata/KVM labels, each MCO identity's RBAC",
    )
    cluster.add_argument(
        "--kube-scheduler-config",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="also check the cluster's kube-scheduler configuration file (its --config) for mco-plugin or MCO's "
        "extender entry (reachable from the host network, ignorable, TLS); repeatable",
    )
    cluster.add_argument("--kubeconfig", help="kubeconfig (else $KUBECONFIG, in-cluster, ~/.kube/config)")
    cluster.add_argument("--context", help="kubeconfig context")
    cluster.add_argument(
        "--namespace",
        help="MCO's namespace, mco_crds_namespace (default: from <config-dir>/analyzer.yaml, else mco-system)",
    )
    cluster.add_argument(
        "--ttl",
        type=float,
        help="the extender's crStatusTTLSeconds (default: from <config-dir>/extender.yaml, else 30)",
    )


def run(args: argparse.Namespace) -> int:
    progress = _progress if sys.stderr.isatty() else _quiet
    views: list[PartView] = []
    if args.cluster:
        checks = _cluster_checks(args, progress)
    else:
        views, problems, notes = probe_host(args.config_dir, timeout=args.timeout, progress=progress)
        fix = "fix the file (docs/configuration.md) and rerun the playbook"
        checks = [Check("configuration", Verdict.FAIL, problem, fix) for problem in problems]
        rename = "rename them as the note says (the playbook writes the new keys)"
        checks += [Check("configuration", Verdict.WARN, note, rename) for note in notes]
        checks += judge(views, args.config_dir) if views or not problems else []
    worst = max((c.verdict for c in checks), default=Verdict.OK)
    if args.output == "json":
        sys.stdout.write(json.dumps(_document(checks, worst), indent=2) + "\n")
    else:
        sys.stdout.write(render_table(checks, worst))
    if args.bundle is not None:
        progress("writing the bundle")
        try:
            write_bundle(args.bundle, _document(checks, worst), {v.part: v.metrics for v in views}, args)
        except OSError as exc:
            print(f"cannot write the bundle {args.bundle}: {exc}", file=sys.stderr)
            return max(int(worst), 1)
        print(f"bundle written to {args.bundle} (secrets redacted; check it before you share it)", file=sys.stderr)
    return int(worst)


def _cluster_checks(args: argparse.Namespace, progress: Callable[[str], None]) -> list[Check]:
    from mco_py.doctor.cluster_checks import judge_cluster  # noqa: PLC0415 - host checks need no client
    from mco_py.doctor.cluster_probe import (  # noqa: PLC0415
        Api,
        extender_answers,
        probe_cluster,
        read_scheduler_file,
    )
    from mco_py.doctor.cluster_view import Read  # noqa: PLC0415
    from mco_py.doctor.kube_scheduler_checks import kube_scheduler_checks  # noqa: PLC0415
    from mco_py.kube.client import load_api_client  # noqa: PLC0415

    try:
        api = load_api_client(args.kubeconfig, context=args.context)
    except MCOError as exc:  # a kube-scheduler file given is still checked: it needs no API server
        files = [read_scheduler_file(path) for path in args.kube_scheduler_config]
        answers = extender_answers([f.text for f in files], args.timeout)
        return [
            Check("kubeconfig", Verdict.FAIL, str(exc), "pass --kubeconfig, or set $KUBECONFIG"),
            *kube_scheduler_checks(Read(), files, answers),
        ]
    namespace = args.namespace or mco_namespace(args.config_dir)
    view = probe_cluster(
        Api(api, timeout=args.timeout, namespace=namespace),
        kube_scheduler_files=args.kube_scheduler_config,
        progress=progress,
    )
    return judge_cluster(view, ttl=args.ttl if args.ttl is not None else _extender_ttl(args.config_dir))


def mco_namespace(config_dir: Path) -> str:
    """The namespace this host's analyzer uses (its rules ConfigMap and Lease), else the default."""
    path = config_dir / "analyzer.yaml"
    try:
        return str(read_settings("analyzer", path).settings.namespace) if path.is_file() else NAMESPACE
    except ConfigError:
        return NAMESPACE


def _extender_ttl(config_dir: Path) -> float:
    """``crStatusTTLSeconds`` of this host's extender, else the extender's default."""
    path = config_dir / "extender.yaml"
    try:
        return (
            float(read_settings("extender", path).settings.cr_status_ttl_seconds) if path.is_file() else DEFAULT_TTL_S
        )
    except ConfigError:
        return DEFAULT_TTL_S


def _progress(message: str) -> None:
    print(f"mco doctor: {message} ...", file=sys.stderr, flush=True)


def _quiet(_: str) -> None:
    pass


def _document(checks: list[Check], worst: Verdict) -> dict[str, object]:
    return {
        "verdict": str(worst),
        "checks": [
            {"name": c.name, "verdict": str(c.verdict), "detail": c.detail, "nextStep": c.next_step} for c in checks
        ],
    }


def render_table(checks: list[Check], worst: Verdict) -> str:
    """CHECK, VERDICT and DETAIL columns; each check not ok is followed by its next step."""
    rows = [("CHECK", "VERDICT", "DETAIL"), *((c.name, str(c.verdict), c.detail) for c in checks)]
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    lines = []
    for row, check in zip(rows, [None, *checks], strict=True):
        lines.append(f"{row[0].ljust(widths[0])}  {row[1].ljust(widths[1])}  {row[2]}".rstrip())
        if check is not None and check.verdict is not Verdict.OK and check.next_step:
            lines.append(f"{''.ljust(widths[0])}  {''.ljust(widths[1])}  -> {check.next_step}")
    counts = {v: sum(c.verdict is v for c in checks) for v in Verdict}
    lines.append(
        f"verdict: {worst} ({counts[Verdict.OK]} ok, {counts[Verdict.WARN]} warn, {counts[Verdict.FAIL]} fail)"
    )
    return "\n".join(lines) + "\n"


def redact(text: str) -> str:
    """A YAML configuration with the values of secret keys replaced (``token_file`` paths stay)."""

    def hide(match: re.Match[str]) -> str:
        key = match.group(1).strip().rstrip(":=").strip().strip("\"'").lower()
        return match.group(0) if key.endswith("file") else match.group(1) + '"<redacted>"'

    return _SECRET_LINE.sub(hide, text)


def write_bundle(
    path: Path, document: dict[str, object], metrics: dict[str, str | None], args: argparse.Namespace
) -> None:
    """The tarball (mode 0600): doctor.json, config/ (redacted), metrics/, logs/ (each log's last
    MiB). Only regular files are read, never through a symbolic link, each at most a MiB."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    root = f"mco-doctor-{stamp}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out, tarfile.open(fileobj=out, mode="w:gz") as tar:
        _add(tar, f"{root}/doctor.json", json.dumps(document, indent=2).encode())
        for file_name in [*(spec[0] for spec in PARTS.values()), "supervisord.conf"]:
            text = _tail(args.config_dir / file_name)
            if text is not None:
                _add(tar, f"{root}/config/{file_name}", redact(text.decode("utf-8", "replace")).encode())
        for part, body in metrics.items():
            if body is not None:
                _add(tar, f"{root}/metrics/{part}.txt", body.encode())
        for log in sorted(args.log_dir.glob("*.log")) if args.log_dir.is_dir() else []:
            data = _tail(log)
            if data is not None:
                _add(tar, f"{root}/logs/{log.name}", data)
        if shutil.which("journalctl") and Path("/run/systemd/system").is_dir():
            for part in PARTS:
                unit = f"mco-{part}"
                try:
                    journal = subprocess.run(
                        ["journalctl", "-u", unit, "-n", "2000", "--no-pager"],
                        capture_output=True,
                        timeout=30,
                        check=False,
                    ).stdout
                except subprocess.TimeoutExpired:
                    journal = b"(journalctl took longer than 30 s)\n"
                _add(tar, f"{root}/logs/{unit}.journal.txt", journal[-LOG_TAIL_BYTES:])


def _tail(path: Path) -> bytes | None:
    """The last LOG_TAIL_BYTES of a regular file (not followed through a symbolic link); None
    when it is missing or something else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        file.seek(max(0, os.fstat(fd).st_size - LOG_TAIL_BYTES))
        return file.read(LOG_TAIL_BYTES)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time())
    info.mode = 0o600
    tar.addfile(info, io.BytesIO(data))
