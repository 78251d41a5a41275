"""List+watch caches of Kubernetes objects, kept in a background thread.

Ours, not ``kubernetes.watch.Watch``: that is one stream with no cache, relist on ``410 Gone`` or
backoff, decoding each event into the client's models; this is the reflector, reading raw events.

:class:`Reflector` is the state machine (like client-go's reflector): list,
then watch from the list's ``resourceVersion``; apply ADDED/MODIFIED/DELETED
events to a local cache; when the watch ends normally, watch again from the
last version; on ``410 Gone`` (version too old) list again at once; on any
other failure (API down, connection dropped) wait with exponential backoff and
list again. The cache keeps its last content while the API is unreachable, so
callers judge freshness from the objects themselves.

:class:`KubeListWatch` talks to the API server through the ``kubernetes``
client (imported only when used); anything else with the :class:`ListWatch` shape can drive a
:class:`Reflector` (tests use a scripted one for the state machine).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
from urllib3.exceptions import HTTPError

from mco_py.errors import MCOError, TransportError

log = logging.getLogger(__name__)


class WatchExpired(MCOError):
    """The watch's resourceVersion is too old (HTTP 410 Gone): list again."""


@dataclass(frozen=True, slots=True)
class Event:
    """One watch event: ``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK``, with the raw object."""

    type: str
    object: Mapping[str, Any]


class ListWatch(Protocol):
    """One kind of object, listable and watchable."""

    def list(self) -> tuple[list[Mapping[str, Any]], str]:
        """Every object and the list's resourceVersion. Raises :class:`TransportError`."""
        ...

    def watch(self, resource_version: str, timeout_seconds: int) -> Iterator[Event]:
        """Events after ``resource_version`` until the server ends the watch.

        Raises :class:`WatchExpired` on 410 and :class:`TransportError` on other failures.
        """
        ...

    def stop(self) -> None:
        """Interrupt a running :meth:`watch` (from another thread)."""
        ...


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        return ""
    namespace = meta.get("namespace") or ""
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


def _resource_version(obj: Mapping[str, Any]) -> str | None:
    meta = obj.get("metadata") or {}
    value = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return str(value) if value else None


@dataclass(frozen=True, slots=True)
class ReflectorStatus:
    """What the reflector is doing, for metrics and readiness."""

    synced: bool
    """At least one list succeeded."""
    connected: bool
    """The last list/watch is running or ended normally."""
    last_error: str
    relists: int
    """Lists after the first (410s, reconnects)."""
    expired: int
    """Watches that ended with 410 Gone."""


class Reflector:
    """Keeps a dict of objects (key ``namespace/name`` or ``name``) in sync with the API in a daemon thread."""

    def __init__(
        self,
        source: ListWatch,
        *,
        on_change: Callable[[Mapping[str, Mapping[str, Any]]], None],
        name: str = "reflector",
        watch_timeout_seconds: int = 300,
        backoff_initial: float = 0.2,
        backoff_max: float = 10.0,
        sleep: Callable[[float], bool] | None = None,
        transform: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
    ) -> None:
        self._source = source
        self._transform = transform
        """Keeps only what the caller needs of each object (pods are large); keys are taken before."""
        self._on_change = on_change
        self._name = name
        self._watch_timeout = watch_timeout_seconds
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._stop = threading.Event()
        self._sleep = sleep or self._stop.wait
        self._items: dict[str, Mapping[str, Any]] = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._synced = False
        self._connected = False
        self._last_error = ""
        self._relists = 0
        self._expired = 0
        self._lists = 0

    # -- public ---------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._source.stop()
        if self._thread is not None:
            self._thread.join(timeout)

    def status(self) -> ReflectorStatus:
        with self._lock:
            return ReflectorStatus(self._synced, self._connected, self._last_error, self._relists, self._expired)

    def items(self) -> dict[str, Mapping[str, Any]]:
        with self._lock:
            return dict(self._items)

    # -- the loop -------------------------------------------------------

    def run(self) -> None:
        """List and watch until :meth:`stop`; never raises."""
        backoff = self._backoff_initial
        while not self._stop.is_set():
            try:
                version = self._list()
                backoff = self._backoff_initial
                self._watch_until_expired(version)
            except WatchExpired as exc:
                with self._lock:
                    self._expired += 1
                log.info("watch expired, listing again", extra={"reflector": self._name, "detail": str(exc)})
                continue
            except MCOError as exc:
                self._failed(str(exc))
            except Exception as exc:  # never let the thread die; the cache must stay readable
                log.exception("unexpected reflector failure", extra={"reflector": self._name})
                self._failed(f"unexpected: {exc}")
            if self._stop.is_set():
                break
            self._sleep(backoff)
            backoff = min(self._backoff_max, backoff * 2)

    def _failed(self, message: str) -> None:
        with self._lock:
            first = self._connected or not self._last_error
            self._connected = False
            self._last_error = message
        if first:
            log.warning(
                "API list/watch failed; keeping the cached objects", extra={"reflector": self._name, "error": message}
            )

    def _list(self) -> str:
        items, version = self._source.list()
        shrink = self._transform or (lambda obj: obj)
        fresh = {k: shrink(obj) for obj in items if (k := _key(obj))}
        with self._lock:
            if self._lists:
                self._relists += 1
            self._lists += 1
            self._items = fresh
            self._synced = True
            self._connected = True
            self._last_error = ""
        self._on_change(dict(fresh))
        return version

    def _watch_until_expired(self, version: str) -> None:
        """Watch from ``version``, re-watching from the newest seen version while watches end normally."""
        while not self._stop.is_set():
            for event in self._source.watch(version, self._watch_timeout):
                if self._stop.is_set():
                    return
                seen = _resource_version(event.object)
                if seen:
                    version = seen
                if event.type == "BOOKMARK":
                    continue
                key = _key(event.object)
                if not key:
                    continue
                with self._lock:
                    if event.type == "DELETED":
                        self._items.pop(key, None)
                    elif event.type in ("ADDED", "MODIFIED"):
                        self._items[key] = self._transform(event.object) if self._transform else event.object
                    else:
                        continue
                    snapshot = dict(self._items)
                self._on_change(snapshot)


class KubeListWatch:
    """:class:`ListWatch` over one API collection through the ``kubernetes`` client (raw JSON, no models).

    ``path`` is the collection URL, e.g. ``/api/v1/nodes`` or
    ``/apis/mco.many-core.io/v1alpha1/nodeinterferencereports``; ``field_selector``
    (``metadata.name=cluster``) and ``label_selector`` narrow it.
    """

    def __init__(
        self,
        api: Any,
        path: str,
        *,
        field_selector: str = "",
        label_selector: str = "",
        request_timeout: float = 10.0,
    ) -> None:
        self._api = api
        self._path = path
        self._field_selector = field_selector
        self._label_selector = label_selector
        self._request_timeout = request_timeout
        self._response: Any = None
        self._stopped = False

    def _call(self, query: list[tuple[str, str]], *, read_timeout: float) -> Any:
        """GET the collection; returns the urllib3 response (body not read yet)."""
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415 - keep standalone start-up light

        if self._field_selector:
            query = [*query, ("fieldSelector", self._field_selector)]
        if self._label_selector:
            query = [*query, ("labelSelector", self._label_selector)]
        try:
            api: Any = self._api
            method, url, headers, body, post = api.param_serialize(
                "GET",
                self._path,
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            result = api.call_api(
                method, url, headers, body, post, _request_timeout=(self._request_timeout, read_timeout)
            )
        except ApiException as exc:
            if exc.status == 410:
                raise WatchExpired(f"{self._path}: {exc.reason}") from exc
            raise TransportError(f"{self._path}: HTTP {exc.status} {exc.reason}") from exc
        except (HTTPError, OSError) as exc:
            raise TransportError(f"{self._path}: API server unreachable: {exc}") from exc
        resp: Any = getattr(result, "response", result)
        status = int(getattr(resp, "status", 0) or 0)
        if not 200 <= status < 300:
            try:
                detail = resp.data[:300].decode("utf-8", "replace")
            except (HTTPError, OSError, AttributeError):
                detail = ""
            finally:
                resp.release_conn()
            if status == 410:
                raise WatchExpired(f"{self._path}: HTTP 410 {detail}")
            raise TransportError(f"{self._path}: HTTP {status} {detail}")
        return resp

    def list(self) -> tuple[list[Mapping[str, Any]], str]:
        resp = self._call([], read_timeout=self._request_timeout)
        try:
            doc = msgspec.json.decode(resp.data)
        except (msgspec.DecodeError, HTTPError, OSError) as exc:
            raise TransportError(f"{self._path}: unreadable list response: {exc}") from exc
        finally:
            resp.release_conn()
        if not isinstance(doc, dict) or not isinstance(doc.get("items") or [], list):
            raise TransportError(f"{self._path}: list response is not a List object")
        items: list[Mapping[str, Any]] = [i for i in doc.get("items") or [] if isinstance(i, dict)]
        meta = doc.get("metadata")
        version = str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""
        return items, version

    def watch(self, resource_version: str, timeout_seconds: int) -> Iterator[Event]:
        query = [("watch", "true"), ("timeoutSeconds", str(timeout_seconds)), ("allowWatchBookmarks", "true")]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        self._stopped = False
        resp = self._call(query, read_timeout=timeout_seconds + self._request_timeout)
        self._response = resp
        buffer = b""
        try:
            for chunk in resp.stream(amt=None, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    event = self._event(line)
                    if event is not None:
                        yield event
            if buffer.strip():
                event = self._event(buffer)
                if event is not None:
                    yield event
        except (HTTPError, OSError) as exc:
            if not self._stopped:
                raise TransportError(f"{self._path}: watch connection lost: {exc}") from exc
        finally:
            self._response = None
            resp.release_conn()

    def _event(self, line: bytes) -> Event | None:
        if not line.strip():
            return None
        try:
            doc = msgspec.json.decode(line)  # faster than json.loads on a report shard's event
        except msgspec.DecodeError as exc:
            raise TransportError(f"{self._path}: unreadable watch event: {exc}") from exc
        kind = doc.get("type") if isinstance(doc, dict) else None
        obj = doc.get("object") if isinstance(doc, dict) else None
        if not isinstance(kind, str) or not isinstance(obj, dict):
            raise TransportError(f"{self._path}: malformed watch event")
        if kind == "ERROR":
            code = obj.get("code")
            message = f"{self._path}: watch error {code}: {obj.get('message', '')}"
            if code == 410:
                raise WatchExpired(message)
            raise TransportError(message)
        return Event(kind, obj)

    def stop(self) -> None:
        self._stopped = True
        resp = self._response
        if resp is not None:
            try:
                resp.shutdown()
            except (AttributeError, OSError, HTTPError):
                with contextlib.suppress(OSError, HTTPError):
                    resp.close()
