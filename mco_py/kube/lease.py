"""Leader election over a ``coordination.k8s.io/v1`` Lease (one report writer).

Ours, not ``kubernetes.leaderelection``: that one's ``run()`` cannot be stopped (a candidate
loops in ``acquire`` until it leads), judges expiry by the wall clock alone, and takes no
injected clock, so neither a clean shutdown nor the skew tests below could use it.

The holder renews ``renewTime`` every ``retry_period``; every update carries the
``resourceVersion`` it read, so two candidates racing for an expired lease cannot both
win (the loser gets 409). A lease counts as expired when its ``renewTime`` is older than
``leaseDurationSeconds`` by our clock, or when we have watched it not change for that long
(robust against clock skew between replicas). A holder that cannot renew stops calling
itself leader once its own lease would have expired.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from mco_py.errors import MCOError, ReportConflict, ReportNotFound
from mco_py.kube.client import translate

log = logging.getLogger(__name__)


def _micro_time(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def _epoch(value: Any) -> float | None:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


class LeaseElector:
    """Campaigns for one Lease; :attr:`is_leader` says whether this replica may write now."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        identity: str,
        name: str = "mco-analyzer",
        namespace: str = "mco-system",
        lease_duration: float = 15.0,
        retry_period: float | None = None,
        request_timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.api = client.CoordinationV1Api(api_client)
        self.identity = identity
        self.name = name
        self.namespace = namespace
        self.lease_duration = lease_duration
        self.retry_period = retry_period if retry_period is not None else max(lease_duration / 3, 0.1)
        self.timeout = request_timeout
        self.clock = clock
        self.monotonic = monotonic
        self.on_change = on_change
        self._renewed_at: float | None = None  # monotonic time of our last successful acquire/renew
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._was_leader = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        """True while our last successful renewal is younger than the lease duration."""
        renewed = self._renewed_at
        return renewed is not None and self.monotonic() - renewed < self.lease_duration

    def _body(
        self, *, resource_version: str | None, acquire: float, transitions: int, holder: str | None = None
    ) -> client.V1Lease:
        return client.V1Lease(
            api_version="coordination.k8s.io/v1",
            kind="Lease",
            metadata=client.V1ObjectMeta(
                name=self.name, namespace=self.namespace, resource_version=resource_version or None
            ),
            spec=client.V1LeaseSpec(
                holder_identity=self.identity if holder is None else holder,
                lease_duration_seconds=max(1, round(self.lease_duration)) if holder is None else 1,
                acquire_time=_micro_time(acquire),
                renew_time=_micro_time(self.clock()),
                lease_transitions=transitions,
            ),
        )

    def try_acquire_or_renew(self) -> bool:
        """One round of the campaign; returns :attr:`is_leader` afterwards. Never raises for API trouble."""
        try:
            self._round()
        except MCOError as exc:
            log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
        leader = self.is_leader
        if leader != self._was_leader:
            self._was_leader = leader
            log.info("lease %s/%s: %s", self.namespace, self.name, "became leader" if leader else "no longer leader")
            if self.on_change:
                self.on_change(leader)
        return leader

    def _round(self) -> None:
        started = self.monotonic()
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.timeout)
        except (ApiException, HTTPError, OSError) as exc:
            err = translate(exc, what=f"read lease {self.namespace}/{self.name}")
            if not isinstance(err, ReportNotFound):
                raise err from exc
            self._create(started)
            return
        spec = lease.spec
        holder = spec.holder_identity if spec else None
        duration = float(spec.lease_duration_seconds or self.lease_duration) if spec else self.lease_duration
        renew = _epoch(spec.renew_time) if spec else None
        transitions = int(spec.lease_transitions or 0) if spec else 0
        version = lease.metadata.resource_version if lease.metadata else None
        record = (holder, renew, version)
        if record != self._observed:
            self._observed = record
            self._observed_at = started
        if spec is not None and holder == self.identity:
            acquire = _epoch(spec.acquire_time) or self.clock()
            self._update(self._body(resource_version=version, acquire=acquire, transitions=transitions), started)
            return
        expired = (
            not holder
            or (renew is not None and self.clock() - renew > duration)
            or started - self._observed_at > duration
        )
        self._renewed_at = None
        if not expired:
            return
        log.info("lease %s/%s held by %r expired; taking over", self.namespace, self.name, holder)
        self._update(self._body(resource_version=version, acquire=self.clock(), transitions=transitions + 1), started)

    def _create(self, started: float) -> None:
        body = self._body(resource_version=None, acquire=self.clock(), transitions=0)
        try:
            self.api.create_namespaced_lease(self.namespace, body, _request_timeout=self.timeout)
        except (ApiException, HTTPError, OSError) as exc:
            err = translate(exc, what=f"create lease {self.namespace}/{self.name}")
            if isinstance(err, ReportConflict):
                return  # another replica created it first
            raise err from exc
        self._renewed_at = started

    def _update(self, body: client.V1Lease, started: float) -> None:
        try:
            self.api.replace_namespaced_lease(self.name, self.namespace, body, _request_timeout=self.timeout)
        except (ApiException, HTTPError, OSError) as exc:
            err = translate(exc, what=f"update lease {self.namespace}/{self.name}")
            if isinstance(err, ReportConflict):
                self._renewed_at = None  # someone else changed it: we are not the holder
                return
            raise err from exc
        self._renewed_at = started

    def release(self) -> None:
        """Give the lease up (on shutdown) so a follower takes over at once."""
        if not self.is_leader:
            return
        self._renewed_at = None
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.timeout)
            if lease.spec and lease.spec.holder_identity == self.identity:
                body = self._body(
                    resource_version=lease.metadata.resource_version if lease.metadata else None,
                    acquire=_epoch(lease.spec.acquire_time) or self.clock(),
                    transitions=int(lease.spec.lease_transitions or 0),
                    holder="",
                )
                self.api.replace_namespaced_lease(self.name, self.namespace, body, _request_timeout=self.timeout)
        except (ApiException, HTTPError, OSError) as exc:
            log.warning("lease %s/%s: release failed: %s", self.namespace, self.name, exc)
        if self._was_leader:
            self._was_leader = False
            if self.on_change:
                self.on_change(False)

    def start(self) -> None:
        """Campaign in a daemon thread every ``retry_period`` seconds."""

        def loop() -> None:
            while not self._stop.is_set():
                self.try_acquire_or_renew()
                self._stop.wait(self.retry_period)

        self._thread = threading.Thread(target=loop, name="lease", daemon=True)
        self._thread.start()

    def stop(self, *, release: bool = True) -> None:
        """End the campaign; by default hand the lease over."""
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=self.timeout + self.retry_period + 1)
        if release:
            self.release()
