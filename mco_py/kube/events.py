"""The node guard's limit changes as Kubernetes Events on the Node (``kubectl describe node``).

Events go out from a bounded queue in one thread, so a collector that reports many changes can
neither block its stream nor grow the analyzer's memory: beyond the queue, changes are dropped
and counted. Only the leader posts (every replica hears every collector).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from mco_py.analysis.guard import GuardChange, change_text

log = logging.getLogger(__name__)

#: Events of cluster-scoped objects (Nodes) live in this namespace, as the kubelet's do.
NODE_EVENTS_NAMESPACE = "default"
MAX_QUEUE = 256


class NodeEvents:
    """Posts :class:`GuardChange` s as Events whose involved object is the Node."""

    def __init__(
        self,
        api: Any,
        *,
        component: str = "mco-analyzer",
        instance: str = "",
        is_leader: Callable[[], bool] = lambda: True,
        on_result: Callable[[str], None] = lambda result: None,
        request_timeout: float = 10.0,
    ) -> None:
        self.api = client.CoreV1Api(api)
        self.component = component
        self.instance = instance
        self.is_leader = is_leader
        self.on_result = on_result
        """Called with posted, dropped or failed (for the metric)."""
        self.timeout = request_timeout
        self._queue: queue.Queue[GuardChange | None] = queue.Queue(MAX_QUEUE)
        self._thread = threading.Thread(target=self._run, name="node-events", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def post(self, change: GuardChange) -> None:
        """Queue ``change`` (dropped and counted when the queue is full, or not the leader)."""
        if not self.is_leader():
            return
        try:
            self._queue.put_nowait(change)
        except queue.Full:
            self.on_result("dropped")

    def stop(self) -> None:
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        failed_once = False
        while (change := self._queue.get()) is not None:
            try:
                self.api.create_namespaced_event(
                    NODE_EVENTS_NAMESPACE, self.body(change), _request_timeout=self.timeout
                )
                self.on_result("posted")
            except (ApiException, HTTPError, OSError) as exc:
                self.on_result("failed")
                if not failed_once:
                    failed_once = True
                    log.warning("cannot post the guard's Events on Nodes (logged once): %s", exc)

    def body(self, change: GuardChange) -> client.CoreV1Event:
        """The Event for ``change``."""
        reason, message = change_text(change)
        return event_body(
            # uid: the node's name, as the kubelet's own node Events (kubectl describe node finds both)
            client.V1ObjectReference(kind="Node", name=change.node, uid=change.node),
            namespace=NODE_EVENTS_NAMESPACE,
            reason=reason,
            message=message,
            kind="Normal",
            component=self.component,
            instance=self.instance,
            host=change.node,
            when=change.time,
        )


def event_body(
    involved: client.V1ObjectReference,
    *,
    namespace: str,
    reason: str,
    message: str,
    kind: str,
    component: str,
    instance: str,
    when: float,
    host: str = "",
) -> client.CoreV1Event:
    """A core/v1 Event about ``involved`` (a first occurrence, named after it)."""
    at = datetime.fromtimestamp(when, tz=UTC)
    return client.CoreV1Event(
        api_version="v1",
        kind="Event",
        metadata=client.V1ObjectMeta(
            name=f"{(involved.name or '')[:200]}.{uuid.uuid4().hex[:16]}", namespace=namespace
        ),
        involved_object=involved,
        reason=reason,
        message=message,
        type=kind,
        source=client.V1EventSource(component=component, host=host or instance or None),
        reporting_component=component,
        reporting_instance=instance,
        first_timestamp=at,
        last_timestamp=at,
        count=1,
    )
