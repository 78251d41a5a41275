"""The ``mco`` command line.

``main()`` only parses arguments and hands over to the subcommand. Service
subcommands (collector, analyzer, extender, report) live in their own packages
and are imported only when used, so ``mco version`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mco_py import __version__
from mco_py.analysis.rules import DetectionRules, default_rules_text, parse_rules, rules_to_yaml
from mco_py.errors import MCOError, ReportNotFound, RulesError

if TYPE_CHECKING:
    from mco_py.model import Report
    from mco_py.store.base import ReportStore

#: name -> (module, help), imported only when used. Each module provides ``add_arguments(parser)``
#: and ``run(args) -> int``.
SERVICE_COMMANDS: dict[str, tuple[str, str]] = {
    "collector": ("mco_py.collector.main", "sample host signals, export /metrics, stream to the analyzers"),
    "analyzer": ("mco_py.analyzer.main", "score collector samples and write the interference report"),
    "extender": ("mco_py.extender.main", "scheduler extender (mco-plugin) for Volcano and kube-scheduler"),
    "doctor": ("mco_py.doctor.main", "check MCO on this host: a verdict and a next step per check"),
}


def _version_line() -> str:
    return f"mco {__version__} (Python {sys.version.split()[0]})"


def _cmd_version(_: argparse.Namespace) -> int:
    print(_version_line())
    return 0


def _read_rules_text(path: Path) -> str | None:
    """The text of ``path`` (``-``: standard input); None (the problem printed) when it cannot be read."""
    if str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        print(f"{path}: cannot read: {exc.strerror or exc}", file=sys.stderr)
        return None


def _print_problems(path: Path, exc: RulesError) -> None:
    print(f"{path}: invalid detection rules ({len(exc.problems)} problem(s)):", file=sys.stderr)
    for problem in exc.problems:
        print(f"  - {problem}", file=sys.stderr)


def _load_rules(path: Path) -> DetectionRules | None:
    """The rules document at ``path`` (``-``: standard input); None, the problems printed, when invalid."""
    text = _read_rules_text(path)
    if text is None:
        return None
    try:
        return parse_rules(text, source=str(path))
    except RulesError as exc:
        _print_problems(path, exc)
        return None


def _cmd_rules_validate(args: argparse.Namespace) -> int:
    rules = _load_rules(args.file)
    if rules is None:
        return 1
    dims = ", ".join(f"{d.name} ({len(d.signals)})" for d in rules.dimensions)
    print(f"{args.file}: valid (version {rules.version}, format {rules.format}, dimensions: {dims})")
    for note in rules.migration_notes:
        print(f"  note: {note}")
    return 0


def _cmd_rules_migrate(args: argparse.Namespace) -> int:
    rules = _load_rules(args.file)
    if rules is None:
        return 1
    sys.stdout.write(rules_to_yaml(rules, source=str(args.file)))
    for note in rules.migration_notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _cmd_rules_default(_: argparse.Namespace) -> int:
    sys.stdout.write(default_rules_text())
    return 0


#: Where ``mco report`` reads without --file or --kubeconfig (the standalone analyzer's file).
DEFAULT_REPORT_FILE = Path("/var/lib/mco/report.json")
#: ``mco report --watch`` reads the report this often (seconds).
WATCH_POLL_S = 1.0


def _report_store(args: argparse.Namespace) -> tuple[ReportStore, str]:
    """The report's source and a line naming it: --file, else the cluster kubectl would use
    (--kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster), else this host's report file.
    The line is empty for --file (the user named it). Raises MCOError."""
    from mco_py.kube.source import find_kube_source  # noqa: PLC0415 - keep `mco version` imports minimal
    from mco_py.store.file import FileReportStore  # noqa: PLC0415

    if args.file is not None:
        return FileReportStore(args.file), ""
    source = find_kube_source(args.kubeconfig, environ=os.environ, home=Path.home())
    if source is None:
        return FileReportStore(DEFAULT_REPORT_FILE), (
            f"mco report: no cluster configured (--kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster): "
            f"reading this host's report file {DEFAULT_REPORT_FILE}"
        )
    from mco_py.kube.client import connect  # noqa: PLC0415
    from mco_py.store.kube import KubeReportStore  # noqa: PLC0415

    api, used = connect(source)
    return KubeReportStore(api, name=args.name), f"mco report: reading the cluster of {used}"


def _cmd_report(args: argparse.Namespace) -> int:
    import time  # noqa: PLC0415 - keep `mco version` imports minimal

    from mco_py.report_view import render  # noqa: PLC0415

    try:
        store, note = _report_store(args)
    except MCOError as exc:
        print(f"cannot reach the cluster: {exc} (a host's own report: --file {DEFAULT_REPORT_FILE})", file=sys.stderr)
        return 1
    if note:
        print(note, file=sys.stderr)
    deadline = time.monotonic() + args.wait
    while True:
        try:
            report = store.read()
            break
        except ReportNotFound as exc:
            if time.monotonic() >= deadline:
                print(f"no report yet ({exc}); is the analyzer running? (see docs/runbooks.md)", file=sys.stderr)
                return 1
            time.sleep(0.5)
        except MCOError as exc:
            print(f"cannot read the report from {store.describe()}: {exc}", file=sys.stderr)
            return 1

    def show(report: Report) -> None:
        text = render(report, fmt=args.output, now=time.time(), source=store.describe(), headers=not args.no_headers)
        sys.stdout.write(text)
        sys.stdout.flush()

    show(report)
    if not args.watch:
        return 0
    # --watch: the report again whenever it changes, until Ctrl-C. A read error is said once
    # (not every poll) and the watch goes on: the analyzer may be restarting.
    separator = {"yaml": "---\n", "table": "\n", "wide": "\n"}.get(args.output, "") if not args.no_headers else ""
    last_error = ""
    try:
        while True:
            time.sleep(WATCH_POLL_S)
            try:
                latest = store.read()
            except MCOError as exc:
                if str(exc) != last_error:
                    print(f"cannot read the report from {store.describe()}: {exc} (still watching)", file=sys.stderr)
                    last_error = str(exc)
                continue
            last_error = ""
            if latest != report:
                report = latest
                sys.stdout.write(separator)
                show(report)
    except KeyboardInterrupt:
        return 0


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; only the ``selected`` service module is imported."""
    parser = argparse.ArgumentParser(prog="mco", description="Many-Core Orchestrator")
    parser.add_argument("--version", action="version", version=_version_line(), help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("version", help="print the version")
    p.set_defaults(func=_cmd_version)

    rules = sub.add_parser("rules", help="detection rules tools")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True, metavar="ACTION")
    p = rules_sub.add_parser("validate", help="validate a rules.yaml (exit 0 valid, 1 invalid)")
    p.add_argument("file", type=Path, help="path to the rules document (- for standard input)")
    p.set_defaults(func=_cmd_rules_validate)
    p = rules_sub.add_parser("migrate", help="print a rules document (format 1 or 2) in format 2")
    p.add_argument("file", type=Path, help="path to the rules document (- for standard input)")
    p.set_defaults(func=_cmd_rules_migrate)
    p = rules_sub.add_parser("default", help="print the documented default rules")
    p.set_defaults(func=_cmd_rules_default)

    p = sub.add_parser("report", help="show the interference report (table, wide, name, json or yaml)")
    p.add_argument(
        "-o",
        "--output",
        choices=("table", "wide", "name", "json", "yaml"),
        default="table",
        help="wide: with dimensions; name: node/NAME lines",
    )
    p.add_argument("--no-headers", action="store_true", help="table and wide: the rows only")
    p.add_argument("-w", "--watch", action="store_true", help="print it again whenever it changes (Ctrl-C ends)")
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--file", type=Path, help=f"read this standalone report file (default {DEFAULT_REPORT_FILE} on a host)"
    )
    source.add_argument(
        "--kubeconfig",
        help="read the NodeInterferenceReport from this cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    p.add_argument("--name", default="cluster", help="report object name (cluster)")
    p.add_argument("--wait", type=float, default=0.0, help="seconds to wait for a first report")
    p.set_defaults(func=_cmd_report)

    for name, (module_name, help_text) in SERVICE_COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        if name != selected:
            continue
        module = importlib.import_module(module_name)
        module.add_arguments(p)
        runner: Callable[[argparse.Namespace], int] = module.run
        p.set_defaults(func=runner)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    raise SystemExit(main())
