"""Random, truncated and mistyped bodies over real HTTP: never a 5xx, never a reply Volcano would choke on."""

from __future__ import annotations

import http.client
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import bodies, go_contract
from .conftest import serve_fresh_report


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = serve_fresh_report(tmp_path_factory.mktemp("fuzz"), max_body=256 * 1024)
    conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=30)
    yield conn
    conn.close()
    running.stop()


def post(conn: http.client.HTTPConnection, path: str, body: bytes) -> tuple[int, bytes]:
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    return resp.status, resp.read()


keys = st.sampled_from(
    [
        "task",
        "TASK",
        "node",
        "nodes",
        "Pod",
        "pod",
        "Node",
        "Name",
        "name",
        "spec",
        "metadata",
        "labels",
        "runtimeClassName",
        "Nodes",
        "items",
        "NodeNames",
        "status",
        "x",
    ]
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=40,
)


def mutate(doc, path, value):
    """Replace one nested value of a realistic body (wrong types in the right places)."""
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


REALISTIC_PATHS = [
    ("task",),
    ("task", "Pod"),
    ("task", "Pod", "spec"),
    ("task", "Pod", "spec", "runtimeClassName"),
    ("node",),
    ("node", "Name"),
    ("node", "Node"),
    ("node", "Node", "metadata"),
    ("node", "Node", "metadata", "labels"),
]


def check(conn, raw: bytes) -> None:
    for path, checker in [
        ("/volcano/v1.9/predicate", go_contract.volcano_predicate_v19),
        ("/volcano/v1.10/predicate", go_contract.volcano_predicate_v110),
        ("/volcano/v1.9/prioritize", go_contract.volcano_prioritize),
        ("/volcano/v1.10/prioritize", go_contract.volcano_prioritize),
        ("/kube/filter", go_contract.kube_filter),
        ("/kube/prioritize", go_contract.kube_prioritize),
    ]:
        status, data = post(conn, path, raw)
        assert status == 200, (path, status, data[:200])
        checker(data)  # raises if Go could not decode it or Volcano could crash on it


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(doc=json_values, cut=st.integers(min_value=0, max_value=300))
def test_random_and_truncated_bodies(server, doc, cut):
    raw = json.dumps(doc).encode()
    check(server, raw)
    check(server, raw[:cut])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(where=st.sampled_from(REALISTIC_PATHS), value=json_values, junk=st.binary(max_size=20))
def test_realistic_bodies_with_wrong_types_and_junk(server, where, value, junk):
    doc = mutate(bodies.predicate_body("worker-1", pods=1, runtime_class="kata"), where, value)
    check(server, bodies.dumps(doc))
    check(server, bodies.dumps(doc) + junk)
    check(server, junk)


def test_oversized_body_over_http_fails_open(server):
    check(server, b" " * (300 * 1024))
