"""An emulated Kubernetes API server for tests: real HTTP, strict like kube-apiserver where it matters.

Why not a library: kmock's KubernetesEmulator (PyPI, the maintained option) is by
its own documentation "a database-over-http": it stores objects as given, does not
merge lists, validate against CRD schemas, prune unknown fields or check resource
versions — exactly the behaviour our writers, watchers and Ansible roles must be
tested against. This server is small, stdlib-only (ThreadingHTTPServer with
TCP_NODELAY) and documented in docs/testing-kubeapi.md.

Use in tests::

    api = start()                      # port 0, serving in a background thread
    api.write_kubeconfig(tmp / "kubeconfig")
    ...
    api.stop()

Failure hooks: ``fail_next``, ``go_down``/``go_up``, ``conflict_next_write``,
``expire_history``; ``requests`` records every request (method, path, query, code).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import re
import select
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.kubeapi import errors as E
from tests.kubeapi.errors import ApiError, FieldError
from tests.kubeapi.jsonutil import clone
from tests.kubeapi.patch import json_patch, merge_patch, strategic_merge
from tests.kubeapi.resources import ResourceType
from tests.kubeapi.selectors import field_matcher, label_matcher
from tests.kubeapi.store import Store, WatchEvent, remove_field

Obj = dict[str, Any]
log = logging.getLogger(__name__)

VERSION = {  # what the kube-apiserver of the cluster tier (v1.34.1) answers, but for the build details
    "major": "1",
    "minor": "34",
    "emulationMajor": "1",
    "emulationMinor": "34",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "33",
    "gitVersion": "v1.34.1",
    "gitCommit": "emulated",
    "gitTreeState": "clean",
    "buildDate": "2025-09-09T19:37:19Z",
    "goVersion": "go1.24.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}
_INJECTED = {
    500: ("InternalError", "Internal error occurred: injected failure"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    429: ("TooManyRequests", "too many requests, please try again later"),
    504: ("Timeout", "the server was unable to return a response in the time allotted"),
}


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    query: str
    code: int


@dataclass
class _FailureRule:
    count: int
    path: re.Pattern[str]
    method: str | None
    code: int


@dataclass(frozen=True)
class _Route:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str
    watch_path: bool


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    api: EmulatedAPI

    def process_request(self, request: Any, client_address: Any) -> None:
        self.api._track(request, add=True)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        self.api._track(request, add=False)
        super().shutdown_request(request)


class EmulatedAPI:
    """A running emulated API server (see module docstring)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        history: int = 1000,
        bookmark_interval: float = 1.0,
        token: str | None = None,
        min_token_seconds: int = 600,
        accept_issued_tokens: bool = False,
    ) -> None:
        self.host = host
        self.min_token_seconds = min_token_seconds
        """TokenRequest's shortest lifetime (600, as the real server; less for renewal tests)."""
        self.accept_issued_tokens = accept_issued_tokens
        """Also authenticate the ServiceAccount tokens this server issued, until their ``exp``."""
        self.issued: dict[str, float] = {}
        self.store = Store(history=history)
        self.bookmark_interval = bookmark_interval
        self.token = token
        self.requests: deque[RequestRecord] = deque(maxlen=10000)
        self._lock = threading.Lock()
        self._failures: list[_FailureRule] = []
        self._connections: set[socket.socket] = set()
        self._stopped = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port = port
        self._serve()

    # ------------------------------------------------------------------ lifecycle

    def _serve(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        server_class = type("_BoundServer", (_Server,), {"address_family": family})
        server = server_class((self.host, self.port), _Handler)
        server.api = self
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()

    def _halt(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = "[::1]" if host == "::" else (f"[{host}]" if ":" in host else host)
        return f"http://{host}:{self.port}"

    @property
    def is_down(self) -> bool:
        return self._server is None

    def stop(self) -> None:
        """Stop serving and end every open connection and watch."""
        self._stopped.set()
        self.store.close()
        self._halt()

    def go_down(self) -> None:
        """Refuse connections (listener closed, open connections and watches cut) until ``go_up``."""
        self._halt()
        with self.store.cond:
            self.store.cond.notify_all()

    def go_up(self) -> None:
        """Serve again on the same address and port, with the same objects."""
        if self._server is None:
            self._serve()

    # ------------------------------------------------------------------ hooks

    def fail_next(self, count: int = 1, *, path: str = ".*", method: str | None = None, code: int = 503) -> None:
        """The next ``count`` requests whose path matches the regex ``path`` (and ``method``) get ``code``."""
        with self._lock:
            self._failures.append(_FailureRule(count, re.compile(path), method.upper() if method else None, code))

    def conflict_next_write(
        self, plural: str, name: str, *, namespace: str = "", group: str = "", count: int = 1
    ) -> None:
        """The next ``count`` updates, patches or deletes of that object get 409 Conflict."""
        with self.store.cond:
            self.store.forced_conflicts[(group, plural, namespace, name)] = count

    def expire_history(self) -> None:
        """Forget the watch history: watches from any older resourceVersion now get 410 Expired."""
        with self.store.cond:
            self.store.events.clear()
            self.store.rv += 1  # the next write starts a fresh window
            self.store.cond.notify_all()

    def _injected_failure(self, method: str, path: str) -> ApiError | None:
        with self._lock:
            for rule in self._failures:
                if rule.count > 0 and rule.path.search(path) and rule.method in (None, method):
                    rule.count -= 1
                    reason, message = _INJECTED.get(rule.code, ("InternalError", "injected failure"))
                    details = {
                        500: {"causes": [{"message": "injected failure"}]},
                        429: {"retryAfterSeconds": 1},
                        504: {"retryAfterSeconds": 1},
                    }.get(rule.code)
                    return ApiError(rule.code, reason, message, details)
            self._failures = [r for r in self._failures if r.count > 0]
        return None

    def authenticated(self, header: str | None) -> bool:
        """The ``Authorization`` header carries this server's token, or (``accept_issued_tokens``) an
        unexpired token it issued."""
        if header == f"Bearer {self.token}":
            return True
        token = (header or "").removeprefix("Bearer ")
        with self._lock:
            expires = self.issued.get(token) if self.accept_issued_tokens else None
        return expires is not None and time.time() < expires

    # ------------------------------------------------------------------ kubeconfig

    def kubeconfig(self, namespace: str = "default") -> Obj:
        user: Obj = {"token": self.token} if self.token else {"token": "emulated"}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulated", "cluster": {"server": self.url}}],
            "users": [{"name": "emulated", "user": user}],
            "contexts": [
                {"name": "emulated", "context": {"cluster": "emulated", "user": "emulated", "namespace": namespace}}
            ],
            "current-context": "emulated",
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path, *, namespace: str = "default") -> Path:
        """Write a kubeconfig for this server (atomically: it appears complete or not at all)."""
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(yaml.safe_dump(self.kubeconfig(namespace), sort_keys=False))
        tmp.replace(target)
        return target


def start(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    history: int = 1000,
    bookmark_interval: float = 1.0,
    token: str | None = None,
    min_token_seconds: int = 600,
    accept_issued_tokens: bool = False,
) -> EmulatedAPI:
    """Start an emulated API server in a background thread; ``port=0`` picks a free port (see ``.port``).

    ``history`` is how many write events watches can resume from (older: 410 Expired);
    ``token``, when given, is required as a bearer token (else 401); with ``accept_issued_tokens``
    the ServiceAccount tokens this server issued (TokenRequest, at least ``min_token_seconds``) are
    accepted too until they expire.
    """
    return EmulatedAPI(
        host,
        port,
        history=history,
        bookmark_interval=bookmark_interval,
        token=token,
        min_token_seconds=min_token_seconds,
        accept_issued_tokens=accept_issued_tokens,
    )


# ---------------------------------------------------------------------------- request handling


def _flag(query: dict[str, list[str]], name: str) -> bool:
    return (query.get(name) or [""])[0].lower() in ("true", "1")


def _param(query: dict[str, list[str]], name: str) -> str:
    return (query.get(name) or [""])[0]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server
    server_version = "kube-apiserver-emulated"

    def log_message(self, format: str, *args: Any) -> None:
        return

    @property
    def api(self) -> EmulatedAPI:
        return self.server.api

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # ------------------------------------------------------------------ plumbing

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json" if not isinstance(payload, bytes) else "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self._record(code)  # before the body: a client that has the answer finds it in the log
        self.wfile.write(data)

    def _record(self, code: int) -> None:
        self._code = code
        self.api.requests.append(RequestRecord(self.command, self._path, self._query, code))

    def _decode(self, body: bytes, content_type: str) -> Any:
        if not body:
            raise E.bad_request("the request body is empty; send a JSON object")
        try:
            if "yaml" in content_type:
                return yaml.safe_load(body)
            return json.loads(body)
        except (ValueError, yaml.YAMLError) as e:
            raise E.bad_request(f"error decoding request body: {e}") from e

    def _dispatch(self, method: str) -> None:
        self._code = 0
        split = urlsplit(self.path)
        path, query = split.path, parse_qs(split.query)
        self._path, self._query = path, split.query
        body = self._read_body()
        try:
            if self.api.token and not self.api.authenticated(self.headers.get("Authorization")):
                raise ApiError(401, "Unauthorized", "Unauthorized")
            failure = self.api._injected_failure(method, path)
            if failure is not None:
                raise failure
            self._route(method, path, query, body)
        except ApiError as e:
            headers = {"Retry-After": "1"} if e.code == 429 else None
            self._send(e.code, e.status(), headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:  # a bug here must reach the test as an answer, not a dropped connection
            log.exception("kubeapi: %s %s failed", method, path)
            if self._code == 0:
                cause = f"{type(e).__name__}: {e}"
                error = ApiError(
                    500, "InternalError", f"Internal error occurred: {cause}", {"causes": [{"message": cause}]}
                )
                self._send(500, error.status())
            else:
                self.close_connection = True
        if self._code == 0:
            self._record(0)  # the client went away before an answer

    # ------------------------------------------------------------------ routing

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> None:
        parts = [p for p in path.split("/") if p]
        if parts in (["healthz"], ["readyz"], ["livez"]):
            self._send(200, b"ok")
            return
        if not self._api_path(parts):
            self._send(404, b"404 page not found\n")  # Go's mux: plain text, no Status
            return
        if method == "GET" and self._discovery(parts):
            return
        route = self._resolve(parts)
        if route is None:
            raise E.no_route()
        watch = route.watch_path or _flag(query, "watch")
        if method == "GET":
            if watch:
                self._watch(route, query)
            elif route.name is None:
                self._list(route, query)
            else:
                self._send(200, self.api.store.get(route.rt, route.namespace or "", route.name))
        elif method == "POST" and route.subresource == "token" and route.name is not None:
            self._token_request(route, body)
        elif method == "POST" and route.name is None and (route.namespace is not None or not route.rt.namespaced):
            self._create(route, query, body)
        elif method == "PUT" and route.name is not None:
            self._update(route, query, body)
        elif method == "PATCH" and route.name is not None:
            self._patch(route, query, body)
        elif method == "DELETE" and route.name is not None:
            self._delete(route, query, body)
        elif method == "DELETE" and route.name is None and "deletecollection" in route.rt.verbs:
            self._delete_collection(route, query)
        else:
            raise E.method_not_allowed()

    def _token_request(self, route: _Route, body: bytes) -> None:
        """TokenRequest for a ServiceAccount that exists: a JWT-shaped token (unsigned; this server
        authenticates no one but its own ``token``) whose claims carry ``sub``, ``exp`` and the
        account's name and UID (``kubernetes.io.serviceaccount``) as the real one's do.
        ``expirationSeconds`` below 600 is refused, as the real server does."""
        account = self.api.store.get(route.rt, route.namespace or "", route.name or "")  # 404 when absent
        request = json.loads(body or b"{}")
        seconds = int((request.get("spec") or {}).get("expirationSeconds") or 3600)
        if seconds < self.api.min_token_seconds:
            least = self.api.min_token_seconds
            detail = f"may not specify a duration less than {'10 minutes' if least == 600 else f'{least} seconds'}"
            error = FieldError("Invalid", "spec.expirationSeconds", seconds, detail)
            raise E.invalid("authentication.k8s.io", "TokenRequest", route.name or "", [error])
        now = int(time.time())
        subject = f"system:serviceaccount:{route.namespace}:{account['metadata']['name']}"
        claims = {
            "aud": ["https://kubernetes.default.svc"],
            "exp": now + seconds,
            "iat": now,
            "sub": subject,
            "kubernetes.io": {
                "namespace": route.namespace,
                "serviceaccount": {"name": account["metadata"]["name"], "uid": account["metadata"]["uid"]},
            },
        }

        def part(obj: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

        token = f"{part({'alg': 'none'})}.{part(claims)}."
        with self.api._lock:
            self.api.issued[token] = float(now + seconds)
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + seconds))
        reply = {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": account["metadata"]["name"], "namespace": route.namespace},
            "spec": {"audiences": claims["aud"], "expirationSeconds": seconds, "boundObjectRef": None},
            "status": {"token": token, "expirationTimestamp": expires},
        }
        self._send(201, reply)

    def _api_path(self, parts: list[str]) -> bool:
        """Served by an API handler (else the mux's plain-text 404): /version, /api..., /apis and its groups."""
        if parts in (["version"], ["apis"]) or parts[:1] == ["api"]:
            return True
        return len(parts) >= 2 and parts[0] == "apis" and parts[1] in self.api.store.group_versions()

    def _resolve(self, parts: list[str]) -> _Route | None:
        if len(parts) >= 2 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        watch_path = bool(rest) and rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        store = self.api.store
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            inner = store.resource_type(group, version, rest[2])
            if inner is not None and inner.namespaced:
                namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            return None
        rt = store.resource_type(group, version, rest[0])
        if rt is None:
            return None
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if sub and not (sub == "status" and rt.status) and not (sub == "token" and rt.plural == "serviceaccounts"):
            return None
        if (rt.namespaced and namespace is None and name is not None) or (not rt.namespaced and namespace):
            return None
        return _Route(rt, namespace, name, sub, watch_path)

    # ------------------------------------------------------------------ discovery

    def _discovery(self, parts: list[str]) -> bool:
        store = self.api.store
        if parts == ["version"]:
            self._send(200, VERSION)
        elif parts == ["api"]:
            address = f"{self.api.host}:{self.api.port}"
            self._send(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
                },
            )
        elif parts == ["api", "v1"]:
            self._send(200, _resource_list("v1", store.types_in("", "v1")))
        elif parts == ["apis"]:
            groups = [_group(g, vs) for g, vs in sorted(store.group_versions().items())]
            self._send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        elif len(parts) == 2 and parts[0] == "apis":
            versions = store.group_versions().get(parts[1])
            if not versions:
                raise E.no_route()
            self._send(200, {"kind": "APIGroup", "apiVersion": "v1", **_group(parts[1], versions)})
        elif len(parts) == 3 and parts[0] == "apis":
            types = store.types_in(parts[1], parts[2])
            if not types:
                raise E.no_route()
            self._send(200, _resource_list(f"{parts[1]}/{parts[2]}", types))
        else:
            return False
        return True

    # ------------------------------------------------------------------ reads

    def _matcher(self, route: _Route, query: dict[str, list[str]]) -> Any:
        labels = label_matcher(_param(query, "labelSelector"))
        fields = field_matcher(
            _param(query, "fieldSelector"), route.rt.fields, route.rt.field_error, route.rt.stored_field
        )
        return lambda obj: labels(obj) and fields(obj)

    def _list(self, route: _Route, query: dict[str, list[str]]) -> None:
        rt = route.rt
        items, rv = self.api.store.list_objects(rt, route.namespace, self._matcher(route, query))
        token = _param(query, "continue")
        if token:
            try:
                state = json.loads(base64.urlsafe_b64decode(token))
                start_key, rv = tuple(state["start"]), int(state["rv"])
            except (ValueError, KeyError, TypeError, binascii.Error) as e:
                raise E.bad_request(f"invalid continue token: {e}") from e
            items = [i for i in items if _key(i) > start_key]
        meta: Obj = {"resourceVersion": str(rv)}
        limit = _param(query, "limit")
        if limit.isdigit() and 0 < int(limit) < len(items):
            rest = len(items) - int(limit)
            items = items[: int(limit)]
            state = {"rv": rv, "start": list(_key(items[-1]))}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
            meta["remainingItemCount"] = rest
        if not rt.custom:
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        kind = str(rt.extra.get("listKind") or rt.kind + "List")
        self._send(200, {"kind": kind, "apiVersion": rt.api_version, "metadata": meta, "items": items})

    def _watch(self, route: _Route, query: dict[str, list[str]]) -> None:
        rt, store = route.rt, self.api.store
        match = self._matcher(route, query)
        if route.name is not None:
            name, base = route.name, match
            match = lambda obj: base(obj) and obj["metadata"]["name"] == name  # noqa: E731
        rv_text = _param(query, "resourceVersion")
        timeout = _param(query, "timeoutSeconds")
        if timeout and not timeout.isdigit():
            raise E.bad_request(f"invalid timeoutSeconds: {timeout!r}")
        deadline = time.monotonic() + (float(timeout) if timeout else 3600.0)
        bookmarks = _flag(query, "allowWatchBookmarks")
        initial: list[Obj] = []
        if rv_text in ("", "0"):
            initial, cursor = store.list_objects(rt, route.namespace, match)
        elif rv_text.isdigit():
            cursor = int(rv_text)
        else:
            raise E.bad_request(f"invalid resource version: {rv_text!r}")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self._record(200)

        def emit(kind: str, obj: Obj) -> None:
            line = json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()

        last_bookmark = time.monotonic()
        try:
            for obj in initial:
                emit("ADDED", obj)
            while (
                not self.api._stopped.is_set()
                and not self.api.is_down
                and time.monotonic() < deadline
                and store.resource_type(rt.group, rt.version, rt.plural) is rt  # CRD changed or gone: end
            ):
                try:
                    events = store.events_after(cursor, wait=min(0.25, max(0.0, deadline - time.monotonic())))
                except ApiError as e:
                    emit("ERROR", e.status())
                    break
                for event in events:
                    cursor = event.rv
                    out = self._watch_event(rt, route.namespace, event, match)
                    if out is not None:
                        emit(*out)
                if bookmarks and time.monotonic() - last_bookmark >= self.api.bookmark_interval:
                    emit(
                        "BOOKMARK",
                        {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(cursor)}},
                    )
                    last_bookmark = time.monotonic()
                if not events and self._client_gone():
                    self.close_connection = True
                    return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _watch_event(  # noqa: PLR0911 - one return per event translation
        self, rt: ResourceType, namespace: str | None, event: WatchEvent, match: Any
    ) -> tuple[str, Obj] | None:
        if event.key != rt.storage_key or (namespace is not None and event.namespace != namespace):
            return None
        obj = self.api.store.present(rt, event.obj)
        now_in = match(event.obj)
        was_in = event.old is not None and match(event.old)
        if event.type == "ADDED":
            return ("ADDED", obj) if now_in else None
        if event.type == "DELETED":
            return ("DELETED", obj) if (was_in or now_in) else None
        if now_in and was_in:
            return ("MODIFIED", obj)
        if now_in:
            return ("ADDED", obj)
        if was_in:
            return ("DELETED", obj)
        return None

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    # ------------------------------------------------------------------ writes

    def _write_flags(self, query: dict[str, list[str]]) -> tuple[bool, bool]:
        dry_run = bool(query.get("dryRun"))
        strict = _param(query, "fieldValidation") == "Strict"
        return dry_run, strict

    def _reply_write(self, code: int, obj: Obj, unknown: list[str], query: dict[str, list[str]]) -> None:
        headers = {}
        if unknown and _param(query, "fieldValidation") != "Ignore":
            headers["Warning"] = ", ".join(f'299 - "unknown field \\"{u}\\""' for u in unknown)
        self._send(code, obj, headers)

    def _writer(self, query: dict[str, list[str]]) -> tuple[str, str]:
        """The field manager of a write that is not an apply: ?fieldManager=, else the User-Agent's product."""
        manager = _param(query, "fieldManager") or self.headers.get("User-Agent", "").split("/")[0][:128]
        return (manager, "Update")

    def _create(self, route: _Route, query: dict[str, list[str]], body: bytes) -> None:
        dry_run, strict = self._write_flags(query)
        doc = self._decode(body, self.headers.get("Content-Type", ""))
        obj, unknown = self.api.store.create(
            route.rt, route.namespace or "", doc, dry_run=dry_run, strict=strict, raw=body, writer=self._writer(query)
        )
        self._reply_write(201, obj, unknown, query)

    def _update(self, route: _Route, query: dict[str, list[str]], body: bytes) -> None:
        dry_run, strict = self._write_flags(query)
        doc = self._decode(body, self.headers.get("Content-Type", ""))
        obj, unknown = self.api.store.update(
            route.rt,
            route.namespace or "",
            route.name or "",
            lambda _current: doc,
            subresource=route.subresource,
            dry_run=dry_run,
            strict=strict,
            raw=body,
            writer=self._writer(query),
        )
        self._reply_write(200, obj, unknown, query)

    def _patch(self, route: _Route, query: dict[str, list[str]], body: bytes) -> None:
        rt = route.rt
        content_type = self.headers.get("Content-Type", "").split(";")[0].strip()
        kind = _PATCH_TYPES.get(content_type)
        if kind is None:
            raise E.unsupported_media_type()
        accepted = [t for t, k in _PATCH_TYPES.items() if not (rt.custom and k == "strategic")]
        if content_type not in accepted:
            raise E.unsupported_media_type(accepted)
        dry_run, strict = self._write_flags(query)
        try:
            patch = self._decode(body, content_type)
        except ApiError as e:
            raise E.bad_request(e.message.replace("error decoding request body", "error decoding patch", 1)) from None
        store, namespace, name = self.api.store, route.namespace or "", route.name or ""
        if kind == "apply":
            if not _param(query, "fieldManager"):
                required = FieldError("Required", "fieldManager", detail="is required for apply patch")
                raise E.invalid("meta.k8s.io", "PatchOptions", "", [required])
            if not isinstance(patch, dict):
                raise E.bad_request("apply patch must be an object")
            try:
                store.get(rt, namespace, name)
            except ApiError as e:
                if e.code != 404:
                    raise
                created = clone(patch)
                created.setdefault("metadata", {}).setdefault("name", name)
                if created["metadata"]["name"] != name:
                    given = created["metadata"]["name"]
                    raise E.bad_request(
                        f"the name of the object ({given}) does not match the name on the URL ({name})"
                    ) from None
                obj, unknown = store.create(rt, namespace, created, dry_run=dry_run, strict=strict, writer=None)
                if not dry_run:
                    store.record_apply(rt, namespace, name, _param(query, "fieldManager"), patch)
                self._reply_write(201, obj, unknown, query)
                return

        def change(current: Obj) -> Any:
            if kind == "json":
                return json_patch(current, patch)
            if not isinstance(patch, dict):
                raise E.bad_request(
                    "error decoding patch: json: cannot unmarshal "
                    f"{E.go_json_type(patch)} into Go value of type map[string]interface {{}}"
                )
            if kind == "merge":
                return merge_patch(current, patch)
            if kind == "strategic":
                return strategic_merge(current, patch)
            merged = strategic_merge(current, patch) if not rt.custom else merge_patch(current, _without_nulls(patch))
            for path in store.dropped_by_apply(rt, namespace, name, _param(query, "fieldManager"), patch):
                remove_field(merged, path)  # what this manager applied before and no longer does
            return merged

        if kind == "apply" and not _flag(query, "force"):
            store.apply_conflicts(rt, namespace, name, _param(query, "fieldManager"), patch)
        writer = None if kind == "apply" else self._writer(query)
        obj, unknown = store.update(
            rt,
            namespace,
            name,
            change,
            subresource=route.subresource,
            dry_run=dry_run,
            require_rv=False,
            strict=strict,
            writer=writer,
        )
        if kind == "apply" and not dry_run:
            store.record_apply(rt, namespace, name, _param(query, "fieldManager"), patch)
        self._reply_write(200, obj, unknown, query)

    def _delete(self, route: _Route, query: dict[str, list[str]], body: bytes) -> None:
        rt = route.rt
        options: Obj = {}
        if body:
            decoded = self._decode(body, self.headers.get("Content-Type", ""))
            options = decoded if isinstance(decoded, dict) else {}
        dry_run = bool(query.get("dryRun")) or bool(options.get("dryRun"))
        if _param(query, "propagationPolicy"):
            options["propagationPolicy"] = _param(query, "propagationPolicy")
        if _param(query, "gracePeriodSeconds").lstrip("-").isdigit():
            options["gracePeriodSeconds"] = int(_param(query, "gracePeriodSeconds"))
        if _param(query, "orphanDependents"):
            options["orphanDependents"] = _flag(query, "orphanDependents")
        obj, deleted = self.api.store.delete(
            rt, route.namespace or "", route.name or "", options.get("preconditions"), dry_run=dry_run, options=options
        )
        if rt.delete_returns_object or not deleted:
            self._send(200, obj)
            return
        details: Obj = {"name": obj["metadata"]["name"]}
        if rt.group:
            details["group"] = rt.group
        details.update({"kind": rt.plural, "uid": obj["metadata"]["uid"]})
        self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})

    def _delete_collection(self, route: _Route, query: dict[str, list[str]]) -> None:
        rt, store = route.rt, self.api.store
        items, _ = store.list_objects(rt, route.namespace, self._matcher(route, query))
        dry_run = bool(query.get("dryRun"))
        deleted = []
        for item in items:
            meta = item["metadata"]
            try:
                obj, _gone = store.delete(rt, meta.get("namespace", ""), meta["name"], dry_run=dry_run)
            except ApiError as e:
                if e.code != 404:
                    raise
                continue
            deleted.append(obj)
        meta_out = {"resourceVersion": str(store.rv)}
        self._send(
            200, {"kind": rt.kind + "List", "apiVersion": rt.api_version, "metadata": meta_out, "items": deleted}
        )


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return (meta.get("namespace", ""), meta["name"])


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def _version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes version order: GA before beta before alpha, higher numbers first, others last by name."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if m is None:
        return (3, 0, 0, version)
    stage = {None: 0, "beta": 1, "alpha": 2}[m[2]]
    return (stage, -int(m[1]), -int(m[3] or 0), version)


def _group(name: str, versions: list[str]) -> Obj:
    versions = sorted(versions, key=_version_priority)
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def _resource_list(group_version: str, types: list[ResourceType]) -> Obj:
    resources = [entry for rt in sorted(types, key=lambda t: t.plural) for entry in rt.discovery()]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}
