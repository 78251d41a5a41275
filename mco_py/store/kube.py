"""Cluster report store: the ``status`` of the ``NodeInterferenceReport`` named ``cluster``, and
the ``NodeInterferenceReportShard`` objects of a sharded report (:mod:`mco_py.report.shards`).

Writes go to the status subresource
(``/apis/mco.many-core.io/v1alpha1/nodeinterferencereports/<name>/status``) with the
``resourceVersion`` just read, so a concurrent change gives 409: the store re-reads and
retries. A missing object is created first. Transient API errors are retried with a
short exponential backoff inside one write; past that the caller gets
:class:`~mco_py.errors.StoreUnavailable` and tries again at its next interval.

A sharded report is written shards first (each whole, as a JSON patch of its status), then the
report object, which names the generation and the shard versions readers serve. Shards of
other generations are deleted once the report object names a new one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, cast

import msgspec
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from msgspec.structs import replace
from urllib3.exceptions import HTTPError

from mco_py.errors import (
    GenerationTaken,
    ReportConflict,
    ReportError,
    ReportNotFound,
    StoreUnavailable,
    error_for_status,
)
from mco_py.model import GROUP, KIND, PLURAL, VERSION, Report, format_time
from mco_py.report.assemble import compose, index_of, shard_of
from mco_py.report.document import (
    ServedIndex,
    ShardIndex,
    ShardSpec,
    ShardStatus,
    Status,
    decode,
    report_of,
    status_of,
    to_builtins,
)
from mco_py.report.shards import (
    GENERATION_LABEL,
    REPORT_LABEL,
    SHARD_KIND,
    SHARD_PLURAL,
    ShardPlan,
    ShardWrite,
    shard_name,
)
from mco_py.report.size import Fitted

log = logging.getLogger(__name__)


def translate(exc: Exception, *, what: str) -> ReportError:
    """Map a client exception to the store error a caller acts on (raise it ``from exc``)."""
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        return error_for_status(status, f"{what}: HTTP {status} {exc.reason or ''}".strip())
    return StoreUnavailable(f"{what}: API server unreachable: {exc}")


DEFAULT_NAME = "cluster"
_COLLECTION = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
_SHARDS = f"/apis/{GROUP}/{VERSION}/{SHARD_PLURAL}"
_encode = msgspec.json.Encoder().encode


def status_body(name: str, status: Status, resource_version: str | None) -> bytes:
    """The body that replaces report ``name``'s status with ``status`` (``resource_version``: the
    object's as read, so a concurrent write is a conflict)."""
    return _encode(
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": name, "resourceVersion": resource_version},
            "status": status,
        }
    )


def shard_patch(write: ShardWrite) -> bytes:
    """The JSON patch that replaces a shard's whole status with ``write``: no resourceVersion to read
    first, and a shard deleted meanwhile is a 404 (the next round starts a new generation)."""
    return _encode([{"op": "add", "path": "/status", "value": ShardStatus(write.version, write.nodes)}])


def _send_json(
    api_client: client.ApiClient,
    method: str,
    path: str,
    body: bytes,
    *,
    content_type: str = "application/json",
    timeout: float,
) -> None:
    """Send ``body``, JSON already encoded with msgspec (its cost: docs/benchmarks.md, "Sharded
    report"), to ``path`` with the client's own authentication and TLS. The client's generated
    methods would turn it into Python objects and ``json.dumps`` them again, many times slower.
    Raises ``ApiException`` for a status of 300 or above, as those methods do, and urllib3 or OS
    errors when the server cannot be reached."""
    method, url, headers, _, _ = api_client.param_serialize(
        method,
        path,
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    resp = api_client.rest_client.pool_manager.request(
        method, url, body=body, headers=headers, timeout=urllib3.Timeout(total=timeout), preload_content=False
    )
    try:
        data = resp.data
    finally:
        resp.release_conn()
    if not 200 <= resp.status < 300:
        raise ApiException(status=resp.status, reason=resp.reason, body=data[:1000].decode("utf-8", "replace"))


class KubeReportStore:
    """Reads and writes the report CR through the Kubernetes API."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        name: str = DEFAULT_NAME,
        conflict_retries: int = 5,
        error_retries: int = 2,
        backoff_seconds: float = 0.2,
        request_timeout: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        heartbeat_seconds: float = 5.0,
    ) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.name = name
        self.conflict_retries = conflict_retries
        self.error_retries = error_retries
        self.backoff = backoff_seconds
        self.timeout = request_timeout
        self.sleep = sleep
        self.clock = clock
        self.monotonic = monotonic
        self.heartbeat_seconds = heartbeat_seconds
        """While a new generation is written, the report object's heartbeat is renewed this often."""
        self._stale_shards = True
        """Shards of another generation may exist (always at start: a previous leader's)."""
        self._sharded = False
        """The last report written was sharded."""

    def describe(self) -> str:
        return f"{KIND} {self.name} ({PLURAL}.{GROUP}/{VERSION})"

    def _get(self) -> dict[str, Any]:
        try:
            obj = cast(
                dict[str, Any],
                self.api.get_cluster_custom_object(GROUP, VERSION, PLURAL, self.name, _request_timeout=self.timeout),
            )
        except (ApiException, HTTPError, OSError) as exc:
            raise translate(exc, what=f"get {self.describe()}") from exc
        return obj

    def read(self, attempts: int = 3) -> Report:
        """The report; a sharded one put together from its shards (read again, up to ``attempts``
        times, while a new generation is being written)."""
        for attempt in range(attempts):
            obj = self._get()
            status = obj.get("status")
            if not isinstance(status, dict):
                raise ReportNotFound(f"{self.describe()} exists but has no status yet")
            try:
                doc = decode(status, Status, "status")
                head = report_of(doc)
                index = index_of(doc)
                if index is None:
                    return head
                return compose(head, index, self._list_shards(f"{GENERATION_LABEL}={index.generation}"))
            except ReportError as exc:
                if isinstance(exc, StoreUnavailable) or attempt == attempts - 1:
                    raise type(exc)(f"{self.describe()}: {exc}") from exc  # the kind stays: `mco report --wait`
                self.sleep(self.backoff)
        raise AssertionError("unreachable")

    def _list_shards(self, selector: str = "") -> list[Any]:
        labels = f"{REPORT_LABEL}={self.name}" + (f",{selector}" if selector else "")
        try:
            listed = cast(
                dict[str, Any],
                self.api.list_cluster_custom_object(
                    GROUP, VERSION, SHARD_PLURAL, label_selector=labels, _request_timeout=self.timeout * 6
                ),
            )
        except (ApiException, HTTPError, OSError) as exc:
            raise translate(exc, what=f"list {SHARD_KIND}s of {self.name}") from exc
        return [shard_of(item) for item in listed.get("items") or [] if isinstance(item, dict)]

    def _create(self) -> dict[str, Any]:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": self.name, "labels": {"app.kubernetes.io/name": "mco"}},
            "spec": {"description": "Per-node interference levels written by mco-analyzer"},
        }
        try:
            obj = cast(
                dict[str, Any],
                self.api.create_cluster_custom_object(GROUP, VERSION, PLURAL, body, _request_timeout=self.timeout),
            )
        except (ApiException, HTTPError, OSError) as exc:
            err = translate(exc, what=f"create {self.describe()}")
            if isinstance(err, ReportConflict):  # someone created it meanwhile
                return self._get()
            if isinstance(err, ReportNotFound):
                raise StoreUnavailable(
                    f"{err}; is the CRD {PLURAL}.{GROUP} installed? (mco_crds role or "
                    "kubectl apply -f mco_py/data/crds/nodeinterferencereports.yaml)"
                ) from exc
            raise err from exc
        log.info("created %s", self.describe())
        return obj

    def _replace_status(self, obj: dict[str, Any], status: Status) -> None:
        metadata = obj.get("metadata") or {}
        body = status_body(self.name, status, metadata.get("resourceVersion"))
        try:
            _send_json(self.api.api_client, "PUT", f"{_COLLECTION}/{self.name}/status", body, timeout=self.timeout)
        except (ApiException, HTTPError, OSError) as exc:
            raise translate(exc, what=f"update {self.describe()} status") from exc

    def write(self, report: Report) -> None:
        self.write_status(status_of(report))

    def publish(self, fitted: Fitted) -> None:
        plan = fitted.shards
        if plan is None:
            self.write_status(fitted.status)
            self._stale_shards |= self._sharded
            self._sharded = False
            if self._stale_shards:  # at start, and after the report went back to one object
                self._delete_stale_shards(None)
            return
        if plan.new_generation:
            self._write_generation(plan)
        else:
            for write in plan.writes:
                self._retrying(lambda w=write: self._write_shard(plan, w), what="write shard")  # type: ignore[misc]
        self.write_status(fitted.status)
        self._sharded = True
        self._stale_shards |= plan.new_generation
        if self._stale_shards:
            self._delete_stale_shards(plan.index.generation)

    def _write_generation(self, plan: ShardPlan) -> None:
        """Every shard of a new generation, while the report object keeps naming the generation readers
        serve: the shards of any other generation (a failed attempt) go first, and its heartbeat goes
        on every ``heartbeat_seconds`` (a first generation of 65,000 nodes takes longer than the
        extender's TTL to write: docs/benchmarks.md, "Sharded report"). Raises
        :class:`GenerationTaken` when the report object already names this generation or a later one."""
        try:
            raw = self._get().get("status")
        except ReportNotFound:
            raw = None
        served: ShardIndex | None = None
        served_status: Status | None = None  # renewed every heartbeat_seconds while the shards are written
        if isinstance(raw, dict) and raw:
            try:  # only the index decides which generations to keep
                shards = decode(raw, ServedIndex, "status").shards
                served = shards if shards and shards.count else None
            except ReportError:
                served = None
            try:
                served_status = decode(raw, Status, "status")
            except ReportError:  # unreadable: readers serve nothing from it, no heartbeat to keep
                served_status = None
        if served is not None and plan.index.generation <= served.generation:
            raise GenerationTaken(
                f"{self.describe()} names generation {served.generation}, not below the new "
                f"{plan.index.generation} (another analyzer's clock is ahead); writing a later one",
                served.generation + 1,
            )
        self._delete_stale_shards(served.generation if served is not None else None, keep_all_if_inline=False)
        beat = self.monotonic()
        for write in plan.writes:
            self._retrying(lambda w=write: self._write_shard(plan, w), what="write shard")  # type: ignore[misc]
            if served_status is not None and self.monotonic() - beat >= self.heartbeat_seconds:
                self.write_status(replace(served_status, last_update_time=format_time(self.clock())))
                beat = self.monotonic()

    def _write_shard(self, plan: ShardPlan, write: ShardWrite) -> None:
        name = shard_name(self.name, plan.index.generation, write.index)
        if plan.new_generation:
            self._create_shard(name, plan.index, write.index)
        try:
            _send_json(
                self.api.api_client,
                "PATCH",
                f"{_SHARDS}/{name}/status",
                shard_patch(write),
                content_type="application/json-patch+json",
                timeout=self.timeout * 6,
            )
        except (ApiException, HTTPError, OSError) as exc:
            raise translate(exc, what=f"update {SHARD_KIND} {name} status") from exc

    def _create_shard(self, name: str, index: ShardIndex, shard: int) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": SHARD_KIND,
            "metadata": {
                "name": name,
                "labels": {
                    "app.kubernetes.io/name": "mco",
                    REPORT_LABEL: self.name,
                    GENERATION_LABEL: str(index.generation),
                },
            },
            "spec": to_builtins(ShardSpec(index.generation, shard, index.count, self.name)),
        }
        try:
            self.api.create_cluster_custom_object(GROUP, VERSION, SHARD_PLURAL, body, _request_timeout=self.timeout)
        except (ApiException, HTTPError, OSError) as exc:
            err = translate(exc, what=f"create {SHARD_KIND} {name}")
            if isinstance(err, ReportConflict):  # left by an earlier attempt at this generation: rewritten whole
                return
            if isinstance(err, ReportNotFound):
                raise StoreUnavailable(
                    f"{err}; is the CRD {SHARD_PLURAL}.{GROUP} installed? (mco_crds role or kubectl apply -f "
                    "mco_py/data/crds/nodeinterferencereportshards.yaml)"
                ) from exc
            raise err from exc

    def _delete_stale_shards(self, keep: int | None, *, keep_all_if_inline: bool = True) -> None:
        """Delete this report's shards of every generation but ``keep`` (None: every shard); on failure,
        log and try again next round. With no shard CRD or no right to list shards, an inline report
        has none to delete (``keep_all_if_inline``): say so once and stop looking."""
        selector = "" if keep is None else f"{GENERATION_LABEL}!={keep}"
        try:
            stale = [s.name for s in self._list_shards(selector)]
            for name in stale:
                try:
                    self.api.delete_cluster_custom_object(
                        GROUP, VERSION, SHARD_PLURAL, name, _request_timeout=self.timeout
                    )
                except (ApiException, HTTPError, OSError) as exc:
                    err = translate(exc, what=f"delete {SHARD_KIND} {name}")
                    if not isinstance(err, ReportNotFound):
                        raise err from exc
        except ReportError as exc:
            if keep is None and keep_all_if_inline and not isinstance(exc, StoreUnavailable):
                log.info("not looking for report shards to delete: %s", exc)
                self._stale_shards = False
                return
            log.warning("cannot delete old report shards yet: %s", exc)
            return
        if stale:
            log.info("deleted %d report shard(s) of other generations", len(stale))
        self._stale_shards = False

    def _retrying(self, action: Callable[[], None], *, what: str) -> None:
        errors = 0
        while True:
            try:
                action()
                return
            except StoreUnavailable:
                errors += 1
                if errors > self.error_retries:
                    raise
                log.debug("%s: transient error; retrying (%d)", what, errors)
                self.sleep(self.backoff * 2 ** (errors - 1))

    def write_status(self, status: Status) -> None:
        conflicts = 0
        errors = 0
        while True:
            try:
                try:
                    obj = self._get()
                except ReportNotFound:
                    obj = self._create()
                self._replace_status(obj, status)
                return
            except ReportConflict:
                conflicts += 1
                if conflicts > self.conflict_retries:
                    raise
                log.debug("conflict writing %s; re-reading (%d)", self.describe(), conflicts)
            except ReportNotFound:
                # deleted between our read and write: create again next round
                conflicts += 1
                if conflicts > self.conflict_retries:
                    raise
            except StoreUnavailable:
                errors += 1
                if errors > self.error_retries:
                    raise
                self.sleep(self.backoff * 2 ** (errors - 1))
