"""What ``mco doctor`` looks at on this host: the parts' configuration files, their processes
and port owners (psutil), their ``/metrics`` and the extender's ``/readyz``.

Every network read is local, short (``timeout``) and bounded in size.
"""

from __future__ import annotations

import http.client
import os
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from mco_py.config import analyzer, collector, extender
from mco_py.config.loader import Loaded, Spec, load, read_document
from mco_py.config.web import WebSettings
from mco_py.doctor.checks import CredentialView, PartView
from mco_py.errors import ConfigError
from mco_py.obs.credentials import CredentialError, CredentialFile, read_validity

#: part -> the credential files its settings name
CREDENTIALS: dict[str, Callable[[Any], list[CredentialFile]]] = {
    "collector": collector.credential_files,
    "analyzer": analyzer.credential_files,
    "extender": extender.credential_files,
}
#: part -> (configuration file name, how the part reads it)
PARTS: dict[str, tuple[str, Spec[Any]]] = {
    "collector": ("collector.yaml", collector.SPEC),
    "analyzer": ("analyzer.yaml", analyzer.SPEC),
    "extender": ("extender.yaml", extender.SPEC),
}
#: Largest HTTP answer read (a collector's /metrics is a small fraction of it).
MAX_BODY = 4 * 1024 * 1024


def read_settings(part: str, path: Path) -> Loaded[Any]:
    """The part's settings in ``path``, read as the part reads them (its environment and flags are
    not known here). Raises ConfigError naming each problem."""
    return load(PARTS[part][1], document=read_document(path, required=True), source=str(path))


def address_of(part: str, settings: Any) -> tuple[str, int]:
    """Where the part's HTTP endpoint answers on this host: its configured address (loopback
    when it binds every address) and port (``listen`` for the extender)."""
    host, port = settings.address if part == "extender" else (settings.metrics_host, settings.metrics_port)
    if host in ("", "0.0.0.0"):  # noqa: S104 - what the part binds, not what we bind
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return host, port


def web_of(part: str, settings: Any) -> WebSettings:
    """The TLS and basic auth settings of the part's HTTP port."""
    web: WebSettings = settings.web if part == "extender" else settings.metrics_web
    return web


def client_context(web: WebSettings) -> ssl.SSLContext | None:
    """How mco doctor reaches a TLS port on its own host: trusting the part's own certificate (the
    file it serves), no name check (it dials loopback); None for plain HTTP."""
    if web.tls.cert_file is None:
        return None
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    context.load_verify_locations(cafile=str(web.tls.cert_file))
    return context


def http_get(
    host: str, port: int, path: str, timeout: float, *, context: ssl.SSLContext | None = None
) -> tuple[int, str]:
    """(status, body) of ``GET http(s)://host:port/path``, straight to the part (no proxy, no
    redirect), at most MAX_BODY bytes within ``timeout`` seconds in all. Raises OSError when
    nobody answers in time or the answer is not HTTP."""
    deadline = time.monotonic() + timeout
    conn: http.client.HTTPConnection
    if context is not None:
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = bytearray()
        while len(body) < MAX_BODY:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the answer took longer than {timeout:g} s")
            chunk = response.read1(64 * 1024)
            if not chunk:
                break
            body += chunk
        return response.status, body[:MAX_BODY].decode("utf-8", "replace")
    except http.client.HTTPException as exc:
        raise OSError(f"not an HTTP answer ({type(exc).__name__})") from exc
    finally:
        conn.close()


def _describe(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid} ({' '.join(proc.cmdline())[:200] or proc.name()})"
    except psutil.Error:
        return f"pid {proc.pid}"


def is_part(proc: psutil.Process, part: str, config: Path) -> bool:
    """``mco <part>`` (console script) or ``python [-u] -m mco_py.cli <part>`` reading ``config``
    (``--config``, relative to the process's directory; without it the analyzer and the extender
    read /etc/mco/<part>.yaml): another MCO on the same host is not this one."""
    try:
        cmdline = proc.cmdline()
        head = cmdline[:6]
        names = [Path(word).name for word in head]
        if part not in head or not any(name == "mco" or name.startswith("mco_py") for name in names):
            return False
        used = None if part == "collector" else Path("/etc/mco") / PARTS[part][0]
        for flag, value in zip(cmdline, [*cmdline[1:], ""], strict=True):
            if flag == "--config":
                used = Path(value)
            elif flag.startswith("--config="):
                used = Path(flag.removeprefix("--config="))
        if used is None:
            return False
        if not used.is_absolute():
            used = Path(proc.cwd()) / used
    except psutil.Error:
        return False
    return os.path.realpath(used) == os.path.realpath(config)


def find_process(part: str, config: Path) -> psutil.Process | None:
    """The running ``mco <part>`` process of ``config``, if any."""
    return next((proc for proc in psutil.process_iter() if is_part(proc, part, config)), None)


#: A listening socket whose owner this user may not see (not root).
HIDDEN_OWNER = "a process hidden from this user (run mco doctor as root to see it)"


def port_listener(port: int) -> psutil.Process | str | None:
    """The process listening on TCP ``port``; :data:`HIDDEN_OWNER` or a note when it cannot be
    named; None when nobody listens."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        return HIDDEN_OWNER
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            if not conn.pid:
                return HIDDEN_OWNER
            try:
                return psutil.Process(conn.pid)
            except psutil.Error:
                return f"pid {conn.pid} (gone)"
    return None


def probe_part(part: str, path: Path, settings: Any, *, timeout: float) -> PartView:
    """Everything :func:`mco_py.doctor.checks.judge` needs about one part (``settings`` read from ``path``)."""
    host, port = address_of(part, settings)
    owner = port_listener(port)
    own = isinstance(owner, psutil.Process) and is_part(owner, part, path)
    proc = owner if own and isinstance(owner, psutil.Process) else find_process(part, path)
    metrics: str | None = None
    error = ""
    web = web_of(part, settings)
    protected = ""
    context: ssl.SSLContext | None = None
    if web.tls.client_auth_type == "RequireAndVerifyClientCert":
        protected = "it asks for a client certificate (clientAuthType RequireAndVerifyClientCert), mco doctor has none"
    else:
        try:
            context = client_context(web)
            status, body = http_get(host, port, "/metrics", timeout, context=context)
            if status == 200:
                metrics = body
            elif status == 401 and web.basic_auth_users:
                protected = "it asks for basic auth (basicAuthUsers), mco doctor has no password"
            else:
                error = f"HTTP {status}"
        except OSError as exc:  # ssl.SSLError too
            error = str(exc)
    ready = None
    if part == "extender" and not protected:
        try:
            ready = http_get(host, port, "/readyz", timeout, context=context)
        except OSError:
            ready = None
    return PartView(
        part=part,
        port=port,
        process=_describe(proc) if proc is not None else "",
        port_owner=_describe(owner) if isinstance(owner, psutil.Process) else owner or "",
        port_is_own=own,
        port_owner_hidden=owner == HIDDEN_OWNER,
        metrics=metrics,
        metrics_error=error,
        metrics_protected=protected,
        ready=ready,
        settings=settings_of(part, settings),
        credentials=read_credentials(part, settings, now=time.time()),
    )


def read_credentials(part: str, settings: Any, *, now: float) -> tuple[CredentialView, ...]:
    """The term of every certificate and token the part's settings name, read from their files."""
    out = []
    for item in CREDENTIALS[part](settings):
        try:
            out.append(CredentialView(item.name, str(item.path), now, read_validity(item.kind, item.path)))
        except CredentialError as exc:
            out.append(CredentialView(item.name, str(item.path), now, error=str(exc)))
    return tuple(out)


def settings_of(part: str, settings: Any) -> dict[str, object]:
    """What the checks need from a part's settings: the extender's TTL; how the analyzer and the
    collector authenticate their gRPC stream (whether each credential is set, never its value)."""
    if part == "extender":
        return {"crStatusTTLSeconds": settings.cr_status_ttl_seconds}
    grpc = settings.stream if part == "collector" else settings
    out: dict[str, object] = {key: bool(getattr(grpc, key)) for key in ("tls_ca", "tls_cert", "token_file")}
    if part == "analyzer":
        out["listen"] = settings.listen
    else:
        out["stream"] = settings.stream.enabled
        out["analyzers"] = list(settings.stream.analyzers)
    return out


def probe_host(
    config_dir: Path, *, timeout: float = 3.0, progress: Callable[[str], None] = lambda _: None
) -> tuple[list[PartView], list[str], list[str]]:
    """A view of each part whose configuration is in ``config_dir``, the problems reading them (the
    part refuses the file too) and the warnings (old keys the part still reads)."""
    views: list[PartView] = []
    problems: list[str] = []
    notes: list[str] = []
    for part, (file_name, spec) in PARTS.items():
        path = config_dir / file_name
        if not path.is_file():
            continue
        progress(f"checking {part}")
        try:
            loaded = read_settings(part, path)
        except ConfigError as exc:  # the part refuses the file too: its defaults say where to look
            problems.append(str(exc))
            loaded = Loaded(spec.settings())
        notes += loaded.notes
        views.append(probe_part(part, path, loaded.settings, timeout=timeout))
    return views, problems, notes
