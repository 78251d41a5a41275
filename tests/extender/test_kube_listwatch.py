"""KubeListWatch over real HTTP through the kubernetes client, against a minimal list/watch API.

This small in-test API serves one collection (list, watch with a scripted event
stream, 410 Gone as a watch ERROR event and as an HTTP status). The shared
emulated API server (tests/kubeapi) is used by test_cluster_mode.py when present.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from mco_py.analysis.policy import PolicySettings, filter_node, report_state
from mco_py.errors import TransportError
from mco_py.extender.source import WatchReportSource
from mco_py.kube.client import load_api_client
from mco_py.kube.watch import KubeListWatch, WatchExpired
from mco_py.model import format_time

PATH = "/apis/mco.many-core.io/v1alpha1/nodeinterferencereports"


class MiniAPI:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.version = 10
        self.events: queue.Queue[Any] = queue.Queue()
        self.requests: list[dict[str, list[str]]] = []
        self.list_status = 200
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                api.requests.append(query)
                if url.path != PATH:
                    self._send(404, {"kind": "Status", "code": 404})
                    return
                if query.get("watch") == ["true"]:
                    self._watch(int(query.get("timeoutSeconds", ["5"])[0]))
                    return
                if api.list_status != 200:
                    self._send(api.list_status, {"kind": "Status", "code": api.list_status, "message": "nope"})
                    return
                self._send(
                    200,
                    {
                        "kind": "List",
                        "metadata": {"resourceVersion": str(api.version)},
                        "items": list(api.objects.values()),
                    },
                )

            def _send(self, code: int, doc: Any) -> None:
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _watch(self, timeout: int) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline:
                    try:
                        item = api.events.get(timeout=0.05)
                    except queue.Empty:
                        continue
                    if item == "close":
                        break
                    line = json.dumps(item).encode() + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def put(self, kind: str, obj: dict[str, Any]) -> None:
        self.version += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.version)}}
        self.objects[obj["metadata"]["name"]] = obj
        self.events.put({"type": kind, "object": obj})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def mini_api(tmp_path):
    api = MiniAPI()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "t",
                "clusters": [{"name": "t", "cluster": {"server": api.url}}],
                "contexts": [{"name": "t", "context": {"cluster": "t", "user": "u"}}],
                "users": [{"name": "u", "user": {"token": "secret-token"}}],
            }
        )
    )
    yield api, load_api_client(kubeconfig)
    api.close()


def nir(updated: float, io: float) -> dict[str, Any]:
    return {
        "metadata": {"name": "cluster"},
        "status": {
            "lastUpdateTime": format_time(updated),
            "nodes": [
                {"name": "worker-1", "level": "High", "score": 80, "signals": {"psiIoSomeAvg10": io}, "reasons": []}
            ],
        },
    }


def test_list_and_watch_through_the_client(mini_api):
    api, client = mini_api
    api.put("ADDED", nir(1000, 50))
    lw = KubeListWatch(client, PATH, field_selector="metadata.name=cluster", request_timeout=5)
    items, version = lw.list()
    assert [i["metadata"]["name"] for i in items] == ["cluster"]
    assert version == "11"
    assert api.requests[-1]["fieldSelector"] == ["metadata.name=cluster"]
    api.events.get_nowait()  # the ADDED event happened before the list
    api.put("MODIFIED", nir(1001, 1))
    api.events.put({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "13"}}})
    api.events.put("close")
    events = list(lw.watch(version, timeout_seconds=5))
    assert [e.type for e in events] == ["MODIFIED", "BOOKMARK"]
    assert api.requests[-1]["resourceVersion"] == ["11"]
    assert api.requests[-1]["watch"] == ["true"]
    api.events.put({"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}})
    with pytest.raises(WatchExpired):
        list(lw.watch("1", timeout_seconds=5))
    api.list_status = 410
    with pytest.raises(WatchExpired):
        lw.list()
    api.list_status = 403
    with pytest.raises(TransportError, match="403"):
        lw.list()


def test_unreachable_api_is_a_transport_error(tmp_path, mini_api):
    api, client = mini_api
    api.close()
    with pytest.raises(TransportError):
        KubeListWatch(client, PATH, request_timeout=1).list()


def test_watch_report_source_over_http_reacts_and_relists(mini_api):
    api, client = mini_api
    now = time.time()
    api.put("ADDED", nir(now, 50))
    source = WatchReportSource(KubeListWatch(client, PATH, request_timeout=5), backoff_max=0.1)
    settings = PolicySettings(ttl_seconds=30)

    def rejected() -> bool:
        snap = source.snapshot()
        state = report_state(
            snap.report, now=time.time(), settings=settings, problem=snap.problem, unreadable=snap.unreadable
        )
        return not filter_node(state, node="worker-1", labels={}, runtime_class=None, settings=settings).passed

    source.start()
    try:
        deadline = time.monotonic() + 5
        while not rejected() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rejected()
        api.put("MODIFIED", nir(now, 1))  # delivered through the watch
        deadline = time.monotonic() + 1  # reaches decisions within a second
        while rejected() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not rejected()
        # 410 on the watch: the change made meanwhile arrives through the relist
        api.objects["cluster"] = {**nir(now, 70), "metadata": {"name": "cluster", "resourceVersion": "99"}}
        api.events.put({"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}})
        deadline = time.monotonic() + 5
        while not rejected() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rejected()
        assert source.reflector_status().expired >= 1
    finally:
        api.events.put("close")
        source.stop()
