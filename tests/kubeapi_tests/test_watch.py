"""Watches over real HTTP: ordered events, 410 Expired then relist, bookmarks, selector transitions."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes import client, watch

from tests.kubeapi import EmulatedAPI, start


def _events(core: client.CoreV1Api, ns: str, expect: int = 1000, **kw: Any) -> list[tuple[str, str, str]]:
    """Events of a configmap watch until ``expect`` arrived or the server ends the stream (timeoutSeconds)."""
    out = []
    stream = watch.Watch()
    for event in stream.stream(core.list_namespaced_config_map, ns, **kw):
        obj = event["object"]
        out.append((event["type"], obj.metadata.name, (obj.data or {}).get("v", "")))
        if len(out) >= expect:
            stream.stop()
    return out


def test_watch_sees_updates_in_order(core: client.CoreV1Api, ns: str) -> None:
    listed = core.list_namespaced_config_map(ns)
    rv = listed.metadata.resource_version
    core.create_namespaced_config_map(ns, {"metadata": {"name": "w"}, "data": {"v": "1"}})
    for i in range(2, 5):
        core.patch_namespaced_config_map("w", ns, {"data": {"v": str(i)}})
    core.delete_namespaced_config_map("w", ns)
    events = _events(core, ns, 5, resource_version=rv, timeout_seconds=30)
    assert events == [
        ("ADDED", "w", "1"),
        ("MODIFIED", "w", "2"),
        ("MODIFIED", "w", "3"),
        ("MODIFIED", "w", "4"),
        ("DELETED", "w", "4"),
    ]


def test_watch_streams_live_changes(core: client.CoreV1Api, ns: str) -> None:
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    seen: list[str] = []
    stream = watch.Watch()

    def consume() -> None:
        for event in stream.stream(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=30):
            seen.append(f"{event['type']} {event['object'].metadata.name}")
            if len(seen) == 2:
                stream.stop()

    reader = threading.Thread(target=consume)
    reader.start()
    core.create_namespaced_config_map(ns, {"metadata": {"name": "live"}})
    core.create_namespace({"metadata": {"name": "elsewhere"}})
    core.create_namespaced_config_map("elsewhere", {"metadata": {"name": "not-mine"}})
    core.delete_namespaced_config_map("live", ns)
    reader.join(timeout=60)
    assert seen == ["ADDED live", "DELETED live"]


# Emulator only: expire_history() stands for a watch cache that has moved on (no cue for that on the real server).
def test_too_old_resource_version_is_410_then_relist_works(
    core: client.CoreV1Api, ns: str, kube_api: EmulatedAPI
) -> None:
    old_rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    kube_api.expire_history()
    with pytest.raises(client.ApiException) as expired:
        _events(core, ns, resource_version=old_rv, timeout_seconds=1)
    assert expired.value.status == 410
    # The informer's answer to 410: list again, watch from the new version.
    relisted = core.list_namespaced_config_map(ns)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "b"}, "data": {"v": "b"}})
    assert _events(core, ns, 1, resource_version=relisted.metadata.resource_version, timeout_seconds=30) == [
        ("ADDED", "b", "b")
    ]


# Emulator only: start(history=3) sets the window the real watch cache sizes itself.
def test_small_history_window_forces_410_as_the_raw_error_event() -> None:
    api = start(history=3)
    try:
        import http.client
        import json

        conn = http.client.HTTPConnection(api.host, api.port, timeout=30)
        for i in range(5):
            payload = json.dumps({"metadata": {"name": f"c{i}"}})
            conn.request("POST", "/api/v1/namespaces/default/configmaps", payload, {"Content-Type": "application/json"})
            assert conn.getresponse().read()
            assert True
        conn.request("GET", "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=1&timeoutSeconds=1")
        response = conn.getresponse()
        lines = [json.loads(line) for line in response.read().splitlines() if line]
        assert response.status == 200
        assert lines[0]["type"] == "ERROR"
        assert {k: lines[0]["object"][k] for k in ("code", "reason", "status")} == {
            "code": 410,
            "reason": "Expired",
            "status": "Failure",
        }
        assert lines[0]["object"]["message"].startswith("too old resource version: 1 (")
        conn.close()
    finally:
        api.stop()


# Emulator only: bookmark_interval; the real server sends bookmarks about once a minute.
def test_watch_without_version_starts_with_current_objects_and_sends_bookmarks(
    core: client.CoreV1Api, ns: str, kube_api: EmulatedAPI
) -> None:
    kube_api.bookmark_interval = 0.2
    core.create_namespaced_config_map(ns, {"metadata": {"name": "existing"}})
    kinds = []
    stream = watch.Watch()
    for event in stream.stream(
        core.list_namespaced_config_map,
        ns,
        allow_watch_bookmarks=True,
        timeout_seconds=30,
        _preload_content=False,
    ):
        kinds.append(event["type"])
        if event["type"] == "BOOKMARK":
            stream.stop()
    assert kinds[0] == "ADDED"
    assert "BOOKMARK" in kinds


def test_label_selector_watch_reports_objects_leaving_and_entering(core: client.CoreV1Api, ns: str) -> None:
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, {"metadata": {"name": "m", "labels": {"pick": "yes"}}})
    core.patch_namespaced_config_map("m", ns, {"metadata": {"labels": {"pick": "no"}}})
    core.patch_namespaced_config_map("m", ns, {"metadata": {"labels": {"pick": "yes"}}})
    events = _events(core, ns, 3, resource_version=rv, timeout_seconds=30, label_selector="pick=yes")
    assert [(t, n) for t, n, _ in events] == [("ADDED", "m"), ("DELETED", "m"), ("ADDED", "m")]
