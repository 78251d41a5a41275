"""The list+watch state machine (Reflector) and the cluster-mode report source built on it.

Driven by a scripted ListWatch (the same interface KubeListWatch implements over
HTTP); the emulated API server tests exercise KubeListWatch itself.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from mco_py.analysis.policy import PolicySettings, filter_node
from mco_py.errors import TransportError
from mco_py.extender.source import NodeLabelCache, WatchReportSource
from mco_py.kube.watch import Event, Reflector, WatchExpired
from mco_py.model import format_time

from .conftest import NOW

_STOP = object()


class ScriptedListWatch:
    """Objects in memory; the test pushes events, expires the watch or takes the 'API' down."""

    def __init__(self, objects: list[dict[str, Any]] | None = None) -> None:
        self.objects = {o["metadata"]["name"]: o for o in objects or []}
        self.version = 1
        self.down = False
        self.lists = 0
        self.watches: list[str] = []
        self._events: queue.Queue[Any] = queue.Queue()

    # ListWatch --------------------------------------------------------
    def list(self) -> tuple[list[Mapping[str, Any]], str]:
        if self.down:
            raise TransportError("API server unreachable: connection refused")
        self.lists += 1
        return list(self.objects.values()), str(self.version)

    def watch(self, resource_version: str, timeout_seconds: int) -> Iterator[Event]:
        if self.down:
            raise TransportError("API server unreachable: connection refused")
        self.watches.append(resource_version)
        while True:
            item = self._events.get()
            if item is _STOP:
                return
            if isinstance(item, Exception):
                raise item
            yield item

    def stop(self) -> None:
        self._events.put(_STOP)

    # script -----------------------------------------------------------
    def apply(self, kind: str, obj: dict[str, Any]) -> None:
        self.version += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.version)}}
        if kind == "DELETED":
            self.objects.pop(obj["metadata"]["name"], None)
        else:
            self.objects[obj["metadata"]["name"]] = obj
        self._events.put(Event(kind, obj))

    def change_silently(self, obj: dict[str, Any]) -> None:
        """A change the watch never delivers (it expired meanwhile)."""
        self.version += 1
        self.objects[obj["metadata"]["name"]] = obj

    def fail(self, exc: Exception) -> None:
        self._events.put(exc)


def nir(updated: float, *, name: str = "cluster", io: float = 61.2) -> dict[str, Any]:
    nodes = [{"name": "worker-1", "level": "High", "score": 80, "signals": {"psiIoSomeAvg10": io}, "reasons": []}]
    return {"metadata": {"name": name}, "status": {"lastUpdateTime": format_time(updated), "nodes": nodes}}


def eventually(check, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.01)
    assert check()


SETTINGS = PolicySettings(ttl_seconds=5)


def rejected(source: WatchReportSource, now: float) -> bool:
    from mco_py.analysis.policy import report_state

    snap = source.snapshot()
    state = report_state(snap.report, now=now, settings=SETTINGS, problem=snap.problem, unreadable=snap.unreadable)
    return not filter_node(state, node="worker-1", labels={}, runtime_class=None, settings=SETTINGS).passed


@pytest.fixture
def started():
    running: list[Any] = []
    yield running.append
    for item in running:
        item.stop()


def test_events_reach_the_report_source(started):
    lw = ScriptedListWatch()
    source = WatchReportSource(lw, name="cluster", backoff_max=0.05)
    assert not source.snapshot().synced
    source.start()
    started(source)
    eventually(lambda: lw.watches == ["1"])
    assert source.snapshot().report is None
    assert "does not exist" in (source.snapshot().problem or "")
    lw.apply("ADDED", nir(NOW))
    eventually(lambda: rejected(source, NOW))
    lw.apply("MODIFIED", nir(NOW, io=1.0))
    eventually(lambda: not rejected(source, NOW) and source.snapshot().report is not None)
    lw.apply("ADDED", nir(NOW, name="other"))  # another report object is ignored
    lw.apply("MODIFIED", {"metadata": {"name": "cluster"}, "status": {"lastUpdateTime": "garbage"}})
    eventually(lambda: source.snapshot().unreadable)
    lw.apply("DELETED", nir(NOW))
    eventually(lambda: source.snapshot().report is None and not source.snapshot().unreadable)


def test_relist_after_410_picks_up_missed_changes(started):
    lw = ScriptedListWatch([nir(NOW)])
    source = WatchReportSource(lw, backoff_max=0.05)
    source.start()
    started(source)
    eventually(lambda: rejected(source, NOW))
    lw.change_silently(nir(NOW, io=0.5))
    lw.fail(WatchExpired("too old resource version"))
    eventually(lambda: not rejected(source, NOW))
    status = source.reflector_status()
    assert lw.lists == 2
    assert status.expired == 1
    assert status.relists == 1
    assert status.connected


def test_api_down_keeps_cache_until_ttl_then_fallback(started):
    lw = ScriptedListWatch([nir(NOW)])
    source = WatchReportSource(lw, backoff_max=0.05)
    source.start()
    started(source)
    eventually(lambda: rejected(source, NOW))
    lw.down = True
    lw.fail(TransportError("watch connection lost"))
    eventually(lambda: not source.reflector_status().connected)
    assert rejected(source, NOW + 4)  # cached report still within TTL
    assert not rejected(source, NOW + 6)  # older than the TTL: basic mode
    lw.down = False
    lw.change_silently(nir(NOW + 6))
    eventually(lambda: source.reflector_status().connected and rejected(source, NOW + 6))


def test_watch_ending_normally_rewatches_from_last_version(started):
    lw = ScriptedListWatch([nir(NOW)])
    reflector = Reflector(lw, on_change=lambda items: None, backoff_max=0.05)
    reflector.start()
    started(reflector)
    eventually(lambda: lw.watches == ["1"])
    lw.apply("MODIFIED", nir(NOW))
    lw.stop()  # the server closes the watch (timeoutSeconds)
    eventually(lambda: lw.watches == ["1", "2"])
    assert lw.lists == 1


def test_backoff_doubles_up_to_the_cap_and_resets():
    lw = ScriptedListWatch()
    lw.down = True
    sleeps: list[float] = []
    reflector: Reflector

    def sleep(seconds: float) -> bool:
        sleeps.append(seconds)
        if len(sleeps) == 6:
            lw.down = False
        if len(sleeps) == 7:
            reflector.stop(timeout=0)  # end the loop after the failure that follows the recovery
        return False

    reflector = Reflector(lw, on_change=lambda items: None, backoff_initial=0.1, backoff_max=0.5, sleep=sleep)
    thread = threading.Thread(target=reflector.run)
    thread.start()
    eventually(lambda: lw.lists == 1)
    lw.fail(TransportError("dropped"))
    thread.join(30)
    assert not thread.is_alive()
    assert sleeps == [0.1, 0.2, 0.4, 0.5, 0.5, 0.5, 0.1]
    assert reflector.status().synced


def test_node_label_cache(started):
    lw = ScriptedListWatch([{"metadata": {"name": "n1", "labels": {"a": "b"}}}, {"metadata": {"name": "n2"}}])
    cache = NodeLabelCache(lw, backoff_max=0.05)
    cache.start()
    started(cache)
    eventually(lambda: cache.labels("n1") == {"a": "b"})
    assert cache.labels("n2") == {}
    assert cache.labels("n3") is None
    lw.apply("ADDED", {"metadata": {"name": "n3", "labels": {"katacontainers.io/kata-runtime": "true"}}})
    eventually(lambda: cache.labels("n3") == {"katacontainers.io/kata-runtime": "true"})
