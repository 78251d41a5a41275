"""The extender over real HTTP: every verb, both Volcano reply formats, kube-scheduler, fallbacks, Kata."""

from __future__ import annotations

import http.client
import json
import socket

import pytest
from prometheus_client import CollectorRegistry

from mco_py.analysis.policy import PolicySettings
from mco_py.extender.app import ExtenderApp
from mco_py.extender.source import FileReportSource, NoLabels
from mco_py.extender.wire import SENSITIVE_TO
from mco_py.model import DimensionScore, Level, NodeAssessment
from mco_py.obs.http import ServerOptions, start_in_thread

from . import bodies, go_contract
from .conftest import NOW, assessment
from .reference_decoder import decoder_named

V19 = "/volcano/v1.9/predicate"
V110 = "/volcano/v1.10/predicate"


@pytest.fixture
def fresh(report_file):
    report_file.write()
    return report_file


def predicate(ext, path, node="worker-1", **kw):
    status, data = ext.post(path, bodies.dumps(bodies.predicate_body(node, **kw)))
    assert status == 200
    if "v1.10" in path or "v1.11" in path or "v2" in path:
        return go_contract.volcano_predicate_v110(data)
    return go_contract.volcano_predicate_v19(data)


# -- Volcano predicate ---------------------------------------------------------


@pytest.mark.parametrize("path", [V19, V110])
def test_predicate_rejects_node_over_hard_constraint_with_reason(make_extender, fresh, path):
    ext = make_extender()
    result = predicate(ext, path, "worker-1")
    assert not result.passed
    assert result.code == 2
    assert result.reason == "mco: node worker-1 psiIoSomeAvg10=61.2 > threshold 20 (report 0s old)"


@pytest.mark.parametrize("path", [V19, V110])
def test_predicate_passes_quiet_unknown_and_absent_nodes(make_extender, fresh, path):
    ext = make_extender()
    for node in ("worker-2", "worker-3", "not-in-report"):
        assert predicate(ext, path, node).passed, node


def test_predicate_memory_full_constraint_zero_threshold(make_extender, fresh):
    ext = make_extender()
    result = predicate(ext, V19, "worker-4")
    assert not result.passed
    assert "psiMemoryFullAvg10=0.5 > threshold 0" in result.reason


def test_reply_formats_are_exactly_the_documented_ones(make_extender, fresh):
    ext = make_extender()
    body = bodies.dumps(bodies.predicate_body("worker-2"))
    assert json.loads(ext.post(V19, body)[1]) == {"status": None}
    assert json.loads(ext.post(V110, body)[1]) == {"status": ""}
    body = bodies.dumps(bodies.predicate_body("worker-1"))
    v19 = json.loads(ext.post(V19, body)[1])
    assert list(v19) == ["status"]
    assert list(v19["status"][0]) == ["Code", "Reason"]
    v110 = json.loads(ext.post(V110, body)[1])
    assert set(v110) == {"status", "code"}
    assert isinstance(v110["status"], str)
    assert v110["code"] == 2
    # a v1.9 reject must not decode as a v1.10 reply and vice versa: the version really matters
    with pytest.raises(go_contract.GoDecodeError):
        go_contract.volcano_predicate_v110(json.dumps(v19).encode())
    with pytest.raises(go_contract.GoDecodeError):
        go_contract.volcano_predicate_v19(json.dumps(v110).encode())


@pytest.mark.parametrize(
    ("configured", "decoder"),
    [("1.9", go_contract.volcano_predicate_v19), ("1.10", go_contract.volcano_predicate_v110)],
)
def test_unversioned_route_uses_configured_version(make_extender, fresh, configured, decoder):
    ext = make_extender(volcano_version=configured)
    status, data = ext.post("/volcano/predicate", bodies.dumps(bodies.predicate_body("worker-1")))
    assert status == 200
    assert not decoder(data).passed


def test_later_volcano_versions_get_the_1_10_format_and_double_slashes_work(make_extender, fresh):
    ext = make_extender()
    status, data = ext.post("/volcano/v1.12//predicate", bodies.dumps(bodies.predicate_body("worker-1")))
    assert status == 200
    assert not go_contract.volcano_predicate_v110(data).passed
    status, _ = ext.post("/volcano/v1.8/predicate", b"{}")
    assert status == 404


# -- Volcano prioritize --------------------------------------------------------


def test_prioritize_scores_every_candidate_lower_interference_higher(make_extender, fresh):
    ext = make_extender(policy=PolicySettings(score_weight=2.0, unknown_score=40.0))
    status, data = ext.post("/volcano/prioritize", bodies.dumps(bodies.prioritize_body(6, pods=1)))
    assert status == 200
    scores = go_contract.volcano_prioritize(data)
    assert set(scores) == {f"worker-{i}" for i in range(6)}
    assert scores["worker-2"] == 200.0  # score 0 -> 100 x weight 2
    assert scores["worker-1"] == pytest.approx(37.0)  # (100 - 81.5) x 2
    assert scores["worker-4"] == 140.0
    assert scores["worker-3"] == scores["worker-0"] == scores["worker-5"] == 80.0  # Unknown/absent: neutral x 2
    assert scores["worker-2"] > scores["worker-4"] > scores["worker-1"]


def test_prioritize_in_fallback_gives_equal_scores(make_extender, report_file):
    ext = make_extender()  # no report file
    scores = go_contract.volcano_prioritize(
        ext.post("/volcano/v1.10/prioritize", bodies.dumps(bodies.prioritize_body(4, pods=1)))[1]
    )
    assert len(scores) == 4
    assert len(set(scores.values())) == 1


# -- fallback (basic mode) -----------------------------------------------------


def _fallback_state(ext):
    return {r: ext.metric("mco_extender_fallback", {"reason": r}) for r in ("missing", "unreadable", "stale", "future")}


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (lambda rf: None, "missing"),
        (lambda rf: rf.write_raw(b"{not json"), "unreadable"),
        (lambda rf: rf.write_raw(b'{"status": {"lastUpdateTime": "yesterday"}}'), "unreadable"),
        (lambda rf: rf.write(updated=NOW - 31), "stale"),
        (lambda rf: rf.write(updated=NOW + 60), "future"),
    ],
    ids=["missing", "garbage", "bad-time", "stale", "future-dated"],
)
def test_unusable_report_means_basic_mode(make_extender, report_file, setup, reason):
    setup(report_file)
    ext = make_extender()
    for path in (V19, V110):
        assert predicate(ext, path, "worker-1").passed  # would be rejected with a usable report
    assert ext.metric("mco_extender_basic_mode") == 1.0
    state = _fallback_state(ext)
    assert state.pop(reason) == 1.0
    assert set(state.values()) == {0.0}
    assert (
        ext.metric(
            "mco_extender_decisions_total", {"verb": "volcano_predicate", "result": "pass", "reason": "fallback"}
        )
        == 2.0
    )


def test_report_within_ttl_and_small_skew_is_used(make_extender, report_file):
    report_file.write(updated=NOW - 29)
    ext = make_extender()
    assert not predicate(ext, V19, "worker-1").passed
    report_file.write(updated=NOW + 3)
    assert not predicate(ext, V19, "worker-1").passed


def test_report_going_stale_switches_to_basic_mode_and_back(make_extender, report_file, clock):
    report_file.write()
    ext = make_extender(policy=PolicySettings(ttl_seconds=5))
    assert not predicate(ext, V19).passed
    clock.now += 6
    assert predicate(ext, V19).passed
    assert ext.metric("mco_extender_fallback", {"reason": "stale"}) == 1.0
    report_file.write(updated=clock.now)  # the analyzer writes again
    assert not predicate(ext, V19).passed
    assert ext.metric("mco_extender_basic_mode") == 0.0
    assert set(_fallback_state(ext).values()) == {0.0}


def test_outdated_report_kept_when_fallback_disabled(make_extender, report_file, clock):
    report_file.write(updated=NOW - 3600)
    ext = make_extender(policy=PolicySettings(fallback_when_outdated=False))
    result = predicate(ext, V19)
    assert not result.passed
    assert "report 3600s old" in result.reason
    assert ext.metric("mco_extender_report_outdated_in_use") == 1.0
    assert ext.metric("mco_extender_report_age_seconds") == pytest.approx(3600)


# -- Kata rule -----------------------------------------------------------------


@pytest.mark.parametrize("with_report", [True, False], ids=["report", "fallback"])
def test_kata_pod_only_fits_kata_nodes(make_extender, report_file, with_report):
    if with_report:
        report_file.write([assessment("worker-2"), assessment("kata-1")])
    ext = make_extender()
    rejected = predicate(ext, V110, "worker-2", runtime_class="kata-qemu")
    assert not rejected.passed
    assert "katacontainers.io/kata-runtime=true" in rejected.reason
    assert "kata-qemu" in rejected.reason
    assert predicate(ext, V110, "kata-1", kata=True, runtime_class="kata-qemu").passed
    assert predicate(ext, V110, "worker-2", runtime_class="runc").passed
    assert predicate(ext, V110, "worker-2").passed


def test_kata_prefixes_are_configurable(make_extender, report_file):
    ext = make_extender(policy=PolicySettings(kata_runtime_class_prefixes=("secure-",)))
    assert predicate(ext, V19, "worker-2", runtime_class="kata-qemu").passed
    assert not predicate(ext, V19, "worker-2", runtime_class="secure-vm").passed


def test_constraints_can_be_disabled(make_extender, fresh):
    ext = make_extender(policy=PolicySettings(hard_constraints={}))
    assert predicate(ext, V19, "worker-1").passed


# -- kube-scheduler ------------------------------------------------------------


def test_kube_filter_with_full_nodes_echoes_survivor_objects(make_extender, fresh):
    ext = make_extender()
    nodes = [bodies.node("worker-1"), bodies.node("worker-2"), bodies.node("worker-3")]
    status, data = ext.post("/kube/filter", bodies.dumps(bodies.kube_args(nodes, None)))
    assert status == 200
    result = go_contract.kube_filter(data)
    assert result.error == ""
    assert [n["metadata"]["name"] for n in result.node_items or []] == ["worker-2", "worker-3"]
    assert result.node_items
    assert result.node_items[0] == nodes[1]
    assert result.node_names is None
    assert set(result.failed) == {"worker-1"}
    assert "psiIoSomeAvg10=61.2" in result.failed["worker-1"]


def test_kube_filter_node_cache_capable_echoes_names(make_extender, fresh):
    ext = make_extender()
    body = bodies.kube_args(None, ["worker-1", "worker-2", "elsewhere"], runtime_class="kata-clh")
    result = go_contract.kube_filter(ext.post("/kube/filter", bodies.dumps(body))[1])
    # no labels known in standalone mode: the Kata rule cannot be checked and fails open
    assert result.node_names == ["worker-2", "elsewhere"]
    assert result.node_items is None
    assert set(result.failed) == {"worker-1"}


def test_kube_filter_applies_kata_rule_from_node_labels(make_extender, report_file):
    ext = make_extender()
    nodes = [bodies.node("plain"), bodies.node("kata", kata=True)]
    result = go_contract.kube_filter(
        ext.post("/kube/filter", bodies.dumps(bodies.kube_args(nodes, None, runtime_class="kata")))[1]
    )
    assert [n["metadata"]["name"] for n in result.node_items or []] == ["kata"]
    assert "kata-runtime" in result.failed["plain"]


def test_kube_filter_undecodable_body_sets_error_only_then(make_extender, fresh):
    ext = make_extender()
    status, data = ext.post("/kube/filter", b"\x00garbage")
    assert status == 200
    assert go_contract.kube_filter(data).error


def test_kube_prioritize_scores_0_to_10(make_extender, fresh):
    ext = make_extender()
    body = bodies.kube_args([bodies.node(f"worker-{i}") for i in range(1, 6)], None)
    scores = go_contract.kube_prioritize(ext.post("/kube/prioritize", bodies.dumps(body))[1])
    assert scores == {"worker-1": 2, "worker-2": 10, "worker-3": 5, "worker-4": 7, "worker-5": 5}
    scores = go_contract.kube_prioritize(
        ext.post("/kube/prioritize", bodies.dumps(bodies.kube_args(None, ["worker-2", "x"])))[1]
    )
    assert scores == {"worker-2": 10, "x": 5}


# -- decoding like Go ----------------------------------------------------------


def _recase(obj, mapping):
    if isinstance(obj, dict):
        return {mapping.get(k, k): _recase(v, mapping) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_recase(v, mapping) for v in obj]
    return obj


@pytest.mark.parametrize("decoder", ["msgspec", "stdlib"])
def test_case_insensitive_keys_decode_the_same(make_extender, fresh, decoder):
    ext = make_extender(decoder=decoder)
    body = bodies.predicate_body("worker-4", runtime_class="kata-qemu", kata=True)
    odd = _recase(
        body,
        {
            "task": "TASK",
            "Pod": "pod",
            "node": "NODE",
            "Name": "name",
            "Node": "node",
            "runtimeClassName": "RuntimeClassName",
            "labels": "Labels",
            "spec": "Spec",
        },
    )
    plain = go_contract.volcano_predicate_v19(ext.post(V19, bodies.dumps(body))[1])
    recased = go_contract.volcano_predicate_v19(ext.post(V19, bodies.dumps(odd))[1])
    assert plain == recased
    assert not plain.passed
    assert "psiMemoryFullAvg10" in plain.reason
    # the Kata rule is still found when only runtimeClassName is spelled differently
    body = bodies.predicate_body("worker-2", runtime_class="kata-qemu")
    body["task"]["Pod"]["spec"]["RUNTIMECLASSNAME"] = body["task"]["Pod"]["spec"].pop("runtimeClassName")
    assert not go_contract.volcano_predicate_v19(ext.post(V19, bodies.dumps(body))[1]).passed


def test_prioritize_with_lowercase_keys_scores_every_node(make_extender, fresh):
    ext = make_extender()
    body = _recase(bodies.prioritize_body(3, pods=1), {"nodes": "Nodes", "Name": "name"})
    scores = go_contract.volcano_prioritize(ext.post("/volcano/prioritize", bodies.dumps(body))[1])
    assert scores == {"worker-0": 50.0, "worker-1": 18.5, "worker-2": 100.0}
    assert ext.metric("mco_extender_slow_decodes_total", {"route": "volcano_prioritize"}) == 1.0


# -- HTTP details ----------------------------------------------------------------


def test_expect_100_continue_is_answered(make_extender, fresh):
    ext = make_extender()
    body = bodies.dumps(bodies.predicate_body("worker-1", pods=40))
    with socket.create_connection(("127.0.0.1", ext.port), timeout=10) as sock:
        sock.sendall(
            b"POST /volcano/v1.9/predicate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        interim = sock.recv(100)
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(body)
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.endswith(b"}]}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    head, _, payload = interim[len(b"HTTP/1.1 100 Continue\r\n\r\n") :].__add__(reply).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert not go_contract.volcano_predicate_v19(payload).passed


def test_keep_alive_and_pipelined_requests(make_extender, fresh):
    ext = make_extender()
    one = bodies.dumps(bodies.predicate_body("worker-1", pods=1))
    two = bodies.dumps(bodies.predicate_body("worker-2", pods=1))
    req = b"POST /volcano/v1.10/predicate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
    with socket.create_connection(("127.0.0.1", ext.port), timeout=10) as sock:
        sock.sendall(req % (len(one), one) + req % (len(two), two))
        data = b""
        while data.count(b"HTTP/1.1 200") < 2 or not data.endswith(b'""}'):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    first, second = data.split(b"HTTP/1.1 200 OK")[1:]
    assert b'"code":2' in first
    assert second.endswith(b'{"status":""}')


def test_chunked_request_body(make_extender, fresh):
    ext = make_extender()
    body = bodies.dumps(bodies.predicate_body("worker-1", pods=2))
    conn = http.client.HTTPConnection("127.0.0.1", ext.port, timeout=10)
    conn.request(
        "POST",
        V19,
        body=iter([body[:1000], body[1000:]]),
        encode_chunked=True,
        headers={"Transfer-Encoding": "chunked"},
    )
    resp = conn.getresponse()
    status, data = resp.status, resp.read()
    conn.close()
    assert status == 200
    assert not go_contract.volcano_predicate_v19(data).passed


def test_body_over_limit_fails_open(make_extender, fresh):
    ext = make_extender(max_body=4096)
    big = bodies.dumps(bodies.predicate_body("worker-1", pods=3))
    assert predicate(ext, V19, "worker-1", pods=3).passed
    scores = go_contract.volcano_prioritize(ext.post("/volcano/prioritize", big)[1])
    assert scores == {}
    result = go_contract.kube_filter(ext.post("/kube/filter", big)[1])
    assert result.error  # nodes unknown: an ignorable extender is skipped rather than filtering everything
    assert ext.metric("mco_extender_decode_errors_total", {"route": "volcano_predicate", "kind": "too-large"}) == 1


def test_health_ready_metrics_and_errors(make_extender, fresh):
    ext = make_extender()
    assert ext.request("GET", "/healthz")[:2] == (200, b"ok\n")
    status, data, _ = ext.request("GET", "/readyz")
    assert status == 200
    assert b"mode=report" in data
    predicate(ext, V19)
    status, data, resp = ext.request("GET", "/metrics")
    text = data.decode()
    assert status == 200
    assert resp.getheader("Content-Type").startswith("text/plain")
    for name in (
        "mco_extender_decisions_total",
        "mco_extender_request_duration_seconds_bucket",
        "mco_extender_fallback",
        "mco_extender_report_age_seconds",
        "mco_extender_decode_errors_total",
    ):
        assert name in text
    assert ext.request("GET", "/nope")[0] == 404
    assert ext.request("GET", V19)[0] == 405
    assert ext.request("POST", "/metrics", b"")[0] == 405


def test_malformed_http_gets_400_not_a_crash(make_extender, fresh):
    ext = make_extender()
    with socket.create_connection(("127.0.0.1", ext.port), timeout=5) as sock:
        sock.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")
    assert ext.request("GET", "/healthz")[0] == 200


def test_predicate_with_level_unknown_in_report_is_not_rejected(make_extender, report_file):
    report_file.write([assessment("worker-1", Level.UNKNOWN, 99, psiIoSomeAvg10=99.0)])
    ext = make_extender()
    assert predicate(ext, V19, "worker-1").passed


def test_kube_filter_echoes_nodes_it_cannot_read_as_passing(make_extender, fresh):
    ext = make_extender()
    odd = {"metadata": {"labels": {"x": "y"}}, "spec": {}}
    nodes = [bodies.node("worker-1"), odd, bodies.node("worker-2")]
    result = go_contract.kube_filter(ext.post("/kube/filter", bodies.dumps(bodies.kube_args(nodes, None)))[1])
    assert result.node_items == [odd, nodes[2]]
    assert set(result.failed) == {"worker-1"}
    scores = go_contract.kube_prioritize(ext.post("/kube/prioritize", bodies.dumps(bodies.kube_args(nodes, None)))[1])
    assert set(scores) == {"worker-1", "worker-2"}


@pytest.mark.parametrize("end", [b"\r\n\r\n", b""], ids=["whole", "unfinished"])
def test_huge_request_head_gets_431(make_extender, fresh, end):
    ext = make_extender()
    with socket.create_connection(("127.0.0.1", ext.port), timeout=5) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (70 * 1024) + end)
        assert sock.recv(100).startswith(b"HTTP/1.1 431")
    assert ext.request("GET", "/healthz")[0] == 200


class _BrokenSource:
    """A report source that fails on every read (a bug, not a missing report)."""

    def snapshot(self):
        raise RuntimeError("boom")

    def describe(self):
        return "broken"

    def start(self):
        pass

    def stop(self):
        pass


def test_internal_errors_fail_open_on_every_route(make_extender):
    ext = make_extender(source=_BrokenSource(), policy=PolicySettings(unknown_score=40))
    assert predicate(ext, V19, "worker-1").passed
    assert predicate(ext, V110, "worker-1", runtime_class="kata").passed
    scores = go_contract.volcano_prioritize(ext.post("/volcano/prioritize", bodies.dumps(bodies.prioritize_body(3)))[1])
    assert scores == {"worker-0": 40.0, "worker-1": 40.0, "worker-2": 40.0}
    nodes = [bodies.node("a"), bodies.node("b")]
    result = go_contract.kube_filter(ext.post("/kube/filter", bodies.dumps(bodies.kube_args(nodes, ["a", "b"])))[1])
    assert result.node_items == nodes
    assert result.node_names == ["a", "b"]
    assert not result.failed
    assert not result.error
    status, _ = ext.post("/kube/prioritize", bodies.dumps(bodies.kube_args(nodes, None)))
    assert status == 200


def test_stop_closes_open_keep_alive_connections(fresh):
    """A client still connected when the server stops: its connection is closed, nothing leaks.

    Closing the loop with the connection open used to raise ResourceWarning in the
    server thread (an error here: filterwarnings = error).
    """
    app = ExtenderApp(
        policy=PolicySettings(),
        source=FileReportSource(fresh.path),
        labels=NoLabels(),
        decoder=decoder_named("msgspec"),
        registry=CollectorRegistry(),
    )
    running = start_in_thread(app, options=ServerOptions(on_guard=app.metrics.watch_connections))
    with socket.create_connection(("127.0.0.1", running.port), timeout=10) as sock:
        sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        running.stop(timeout=30)
        assert not running.thread.is_alive()
        assert sock.recv(65536) == b"", "the server closed the keep-alive connection"
    assert not running.guard.open


def test_prioritize_weighs_the_dimensions_the_pod_names(make_extender, report_file):
    cpu_busy = NodeAssessment(
        "worker-0", Level.HIGH, 100.0, {}, NOW - 1, dominant="cpu", dimensions={"cpu": DimensionScore(Level.HIGH, 100)}
    )
    io_busy = NodeAssessment(
        "worker-1", Level.MEDIUM, 60.0, {}, NOW - 1, dominant="io", dimensions={"io": DimensionScore(Level.MEDIUM, 60)}
    )
    report_file.write([cpu_busy, io_busy])
    ext = make_extender()
    plain = bodies.prioritize_body(2, pods=1)
    io_pod = bodies.prioritize_body(2, pods=1)
    io_pod["task"]["Pod"]["metadata"]["annotations"][SENSITIVE_TO] = "io"
    assert go_contract.volcano_prioritize(ext.post("/volcano/prioritize", bodies.dumps(plain))[1]) == {
        "worker-0": 0.0,
        "worker-1": 40.0,
    }
    assert go_contract.volcano_prioritize(ext.post("/volcano/prioritize", bodies.dumps(io_pod))[1]) == {
        "worker-0": 100.0,  # busy, but not on the pod's resource
        "worker-1": 40.0,
    }
    kube = bodies.kube_args(None, ["worker-0", "worker-1"])
    kube["Pod"]["metadata"]["annotations"][SENSITIVE_TO] = "io"
    _, data = ext.post("/kube/prioritize", bodies.dumps(kube))
    assert {h["Host"]: h["Score"] for h in json.loads(data)} == {"worker-0": 10, "worker-1": 4}
    decisions = {"verb": "volcano_prioritize", "result": "score"}
    assert ext.metric("mco_extender_decisions_total", {**decisions, "reason": "dimensions"}) == 2.0
    assert ext.metric("mco_extender_decisions_total", {**decisions, "reason": "report"}) == 2.0


def test_an_unreadable_sensitivity_annotation_scores_by_node_level(make_extender, report_file, caplog):
    report_file.write()
    ext = make_extender()
    body = bodies.prioritize_body(3, pods=1)
    body["task"]["Pod"]["metadata"]["annotations"][SENSITIVE_TO] = "cpu=lots"
    scores = go_contract.volcano_prioritize(ext.post("/volcano/prioritize", bodies.dumps(body))[1])
    assert scores == go_contract.volcano_prioritize(
        ext.post("/volcano/prioritize", bodies.dumps(bodies.prioritize_body(3, pods=1)))[1]
    )
    labels = {"verb": "volcano_prioritize", "result": "score", "reason": "invalid-hint"}
    assert ext.metric("mco_extender_decisions_total", labels) == 3.0
    assert any("weight of cpu is not a number" in r.getMessage() for r in caplog.records)
