"""What ``mco doctor`` looks at on this host: the parts' configuration files, their processes
and port owners (psutil), their ``/metrics`` and the extender's ``/readyz``.

Every network read is local, short (``timeout``) and bounded in size.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import yaml

from mco_py.doctor.checks import PartView

#: part -> (configuration file name, port key, default port)
PARTS: dict[str, tuple[str, str, int]] = {
    "collector": ("collector.yaml", "metrics_port", 9877),
    "analyzer": ("analyzer.yaml", "metrics_port", 9878),
    "extender": ("extender.yaml", "listen", 9879),
}
#: Largest HTTP answer read (a collector's /metrics is ~10 KiB).
MAX_BODY = 4 * 1024 * 1024


def read_config(path: Path) -> dict[str, Any]:
    """The YAML mapping in ``path``; an empty one when it is not a mapping."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    return doc if isinstance(doc, dict) else {}


def port_of(part: str, config: dict[str, Any]) -> int:
    """The part's HTTP port from its configuration (``listen: "host:port"`` for the extender)."""
    _, key, default = PARTS[part]
    value = config.get(key, default)
    if key == "listen":
        value = str(value).rsplit(":", 1)[-1] or default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def http_get(port: int, path: str, timeout: float) -> tuple[int, str]:
    """(status, body) of ``GET http://127.0.0.1:port/path``; raises OSError when nobody answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as response:
            return response.status, response.read(MAX_BODY).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(MAX_BODY).decode("utf-8", "replace")


def _describe(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid} ({' '.join(proc.cmdline())[:200] or proc.name()})"
    except psutil.Error:
        return f"pid {proc.pid}"


def is_part(proc: psutil.Process, part: str, config: Path) -> bool:
    """``mco <part>`` (console script) or ``python -m mco_py.cli <part>`` reading ``config``
    (``--config``; without it, /etc/mco/<part>.yaml): another MCO on the host is not this one."""
    try:
        cmdline = proc.cmdline()
    except psutil.Error:
        return False
    head = cmdline[:4]
    names = [Path(word).name for word in head]
    if part not in head or not any(name == "mco" or name.startswith("mco_py") for name in names):
        return False
    used = Path("/etc/mco") / PARTS[part][0]
    for flag, value in zip(cmdline, [*cmdline[1:], ""], strict=True):
        if flag == "--config":
            used = Path(value)
        elif flag.startswith("--config="):
            used = Path(flag.removeprefix("--config="))
    return os.path.realpath(used) == os.path.realpath(config)


def find_process(part: str, config: Path) -> psutil.Process | None:
    """The running ``mco <part>`` process of ``config``, if any."""
    return next((proc for proc in psutil.process_iter() if is_part(proc, part, config)), None)


def port_listener(port: int) -> psutil.Process | str | None:
    """The process listening on TCP ``port``; a note when the socket's owner is hidden from
    this user; None when nobody listens."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        return "an unknown process (run mco doctor as root to see it)"
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            if not conn.pid:
                return "a process of another user (run mco doctor as root to see it)"
            try:
                return psutil.Process(conn.pid)
            except psutil.Error:
                return f"pid {conn.pid} (gone)"
    return None


def probe_part(part: str, path: Path, config: dict[str, Any], *, timeout: float) -> PartView:
    """Everything :func:`mco_py.doctor.checks.judge` needs about one part (``config`` read from ``path``)."""
    port = port_of(part, config)
    owner = port_listener(port)
    own = isinstance(owner, psutil.Process) and is_part(owner, part, path)
    proc = owner if own and isinstance(owner, psutil.Process) else find_process(part, path)
    metrics: str | None = None
    error = ""
    try:
        status, body = http_get(port, "/metrics", timeout)
        if status == 200:
            metrics = body
        else:
            error = f"HTTP {status}"
    except OSError as exc:
        error = str(getattr(exc, "reason", exc))
    ready = None
    if part == "extender":
        try:
            ready = http_get(port, "/readyz", timeout)
        except OSError:
            ready = None
    settings = {"crStatusTTLSeconds": config.get("crStatusTTLSeconds", 30)} if part == "extender" else {}
    return PartView(
        part=part,
        port=port,
        process=_describe(proc) if proc is not None else "",
        port_owner=_describe(owner) if isinstance(owner, psutil.Process) else owner or "",
        port_is_own=own,
        metrics=metrics,
        metrics_error=error,
        ready=ready,
        settings=settings,
    )


def probe_host(
    config_dir: Path, *, timeout: float = 3.0, progress: Callable[[str], None] = lambda _: None
) -> tuple[list[PartView], list[str]]:
    """A view of each part whose configuration is in ``config_dir``, and the problems reading them."""
    views: list[PartView] = []
    problems: list[str] = []
    for part, (file_name, _, _) in PARTS.items():
        path = config_dir / file_name
        if not path.is_file():
            continue
        progress(f"checking {part}")
        try:
            config = read_config(path)
        except (OSError, yaml.YAMLError) as exc:
            problems.append(f"{path}: cannot read: {exc}")
            config = {}
        views.append(probe_part(part, path, config, timeout=timeout))
    return views, problems
