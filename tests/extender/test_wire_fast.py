"""The fast predicate readers (msgspec typed pass, simdjson for large bodies) decide exactly as the generic walk.

Documents are built with every key Volcano sends spelled exactly, in other
letter case, duplicated, missing or with a value of the wrong type, plus
unknown keys; the generic (standard-library, case-insensitive) reading is the
reference. The simdjson reader may decline (None: the generic rules decide) but
must never read differently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from mco_py.analysis.policy import PolicySettings
from mco_py.errors import DecodeError
from mco_py.extender import wire
from mco_py.extender.app import ExtenderApp
from mco_py.extender.source import FileReportSource, NoLabels
from mco_py.obs.http_app import Request

from . import bodies
from .conftest import Clock, ReportFile
from .reference_decoder import StdlibDecoder, decoder_named

GENERIC = StdlibDecoder()
FAST = wire.MsgspecDecoder()


@dataclass(frozen=True)
class Obj:
    """A JSON object as written, key order and duplicates kept."""

    pairs: tuple[tuple[str, Any], ...]


def dump(value: Any) -> str:
    if isinstance(value, Obj):
        return "{" + ",".join(f"{json.dumps(k)}:{dump(v)}" for k, v in value.pairs) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dump(v) for v in value) + "]"
    return json.dumps(value)


def spellings(key: str) -> st.SearchStrategy[str]:
    variants = sorted({key, key.upper(), key.lower(), key.swapcase(), key[:1].swapcase() + key[1:]})
    return st.sampled_from(variants)


wrong = st.one_of(st.none(), st.integers(-3, 3), st.booleans(), st.just([]), st.just(["x"]), st.just(Obj(())))
text = st.sampled_from(["", "w", "worker-1", "kata", "kata-qemu", "runc", "web-0", "default"])
unknown = st.tuples(st.sampled_from(["x", "Tasks", "UID", "status", "Idle", "named", "label"]), wrong | text)


@st.composite
def member(draw: st.DrawFn, key: str, value: st.SearchStrategy[Any]) -> list[tuple[str, Any]]:
    """Zero, one or two entries for ``key``: exact or other case, right or wrong type (the second one may repeat)."""
    out: list[tuple[str, Any]] = []
    for _ in range(draw(st.sampled_from([1] * 12 + [0, 2]))):
        name = key if draw(st.integers(0, 12)) else draw(spellings(key))
        out.append((name, draw(value) if draw(st.integers(0, 5)) else draw(wrong)))
    return out


@st.composite
def obj(draw: st.DrawFn, **fields: st.SearchStrategy[Any]) -> Obj:
    pairs: list[tuple[str, Any]] = []
    for key, value in fields.items():
        pairs += draw(member(key, value))
    pairs += draw(st.lists(unknown, max_size=2))
    return Obj(tuple(draw(st.permutations(pairs))))


labels = st.builds(
    lambda pairs: Obj(tuple(pairs)),
    st.lists(
        st.tuples(
            st.sampled_from([bodies.KATA_LABEL, "kubernetes.io/os", "KATACONTAINERS.IO/KATA-RUNTIME"]),
            st.sampled_from(["true", "false", "linux"]) | wrong,
        ),
        max_size=4,
    ),
)
pods = obj(metadata=obj(name=text, namespace=text), spec=obj(runtimeClassName=text))
tasks = obj(Pod=pods)
nodes = obj(Name=text, Node=obj(metadata=obj(name=text, labels=labels)))
documents = obj(task=tasks, node=nodes)


def generic(raw: bytes) -> tuple[wire.PodRef, wire.NodeRef | None]:
    req = GENERIC.volcano_predicate(raw)
    return req.pod, req.node


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents)
def test_simdjson_reader_reads_as_the_generic_walk_or_declines(doc):
    raw = dump(doc).encode()
    simd = wire._simd_predicate(raw)
    event("simdjson read it" if simd is not None else "simdjson declined")
    if simd is not None:
        assert (simd.pod, simd.node) == generic(raw)
        assert not simd.slow_path


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents)
def test_msgspec_decoder_reads_as_the_generic_walk(doc):
    raw = dump(doc).encode()
    req = FAST.volcano_predicate(raw)
    assert (req.pod, req.node) == generic(raw)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(doc=documents)
def test_large_bodies_read_as_the_generic_walk(doc):
    """Padded past SIMDJSON_MIN_BYTES, so the decoder itself takes the simdjson path when it can."""
    pad = "x" * wire.SIMDJSON_MIN_BYTES
    raw = dump(Obj((("Tasks", pad), *doc.pairs))).encode()
    assert len(raw) >= wire.SIMDJSON_MIN_BYTES
    req = FAST.volcano_predicate(raw)
    assert (req.pod, req.node) == generic(raw)


def test_realistic_large_predicate_takes_the_simdjson_path():
    body = bodies.predicate_body("worker-3", pods=30, kata=True, runtime_class="kata-qemu")
    raw = bodies.dumps(body)
    assert len(raw) >= wire.SIMDJSON_MIN_BYTES
    simd = wire._simd_predicate(raw)
    assert simd is not None
    assert (simd.pod, simd.node) == generic(raw)
    assert simd.node is not None
    assert simd.node.labels is not None
    assert simd.node.labels[bodies.KATA_LABEL] == "true"
    assert simd.pod.runtime_class == "kata-qemu"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"task":{"Pod":{"spec":{"runtimeclassname":"kata"}}},"node":{"Name":"w"}}',  # other case: generic decides
        b'{"task":{"Pod":{"spec":{"runtimeClassName":"kata","runtimeClassName":"runc"}}},"node":{"Name":"w"}}',
        b'{"node":{"Name":"a"},"node":{"Name":"b"}}',  # simdjson would take the first, Go and the walk the last
        b'[{"node":{"Name":"a"}}]',
        b'{"node":{"Name":"a","Idle":{"Memory":123456789012345678901234567890}}}',  # big integer
        b'{"node":{"Name":"a"}} x',
    ],
)
def test_simdjson_reader_declines_what_only_the_generic_rules_settle(raw):
    assert wire._simd_predicate(raw) is None
    # and the decoder as a whole still answers as the generic walk (or refuses the body the same way)
    try:
        expected = generic(raw)
    except DecodeError:
        with pytest.raises(DecodeError):
            FAST.volcano_predicate(raw)
        return
    req = FAST.volcano_predicate(raw)
    assert (req.pod, req.node) == expected


def test_simdjson_reader_declines_invalid_utf8():
    # msgspec and the standard library disagree on it already (Go would read U+FFFD); simdjson stays out of it
    assert wire._simd_predicate(b'{"node":{"Name":"a\xff"}}') is None


def test_simdjson_parser_recovers_after_a_failed_document():
    assert wire._simd_predicate(b'{"node":{"Name":"a","n":123456789012345678901234567890}}') is None
    ok = wire._simd_predicate(b'{"node":{"Name":"a","Node":{"metadata":{"labels":{}}}}}')
    assert ok is not None
    assert ok.node == wire.NodeRef("a", {})


@pytest.mark.parametrize("node", ["worker-1", "worker-2"])  # noisy (rejected by the report) and quiet
@pytest.mark.parametrize("runtime_class", [None, "kata-qemu"])
@pytest.mark.parametrize("kata", [False, True])
def test_large_predicate_replies_match_the_stdlib_service(tmp_path, node, runtime_class, kata):
    report = tmp_path / "report.json"
    ReportFile(report).write()
    raw = bodies.dumps(bodies.predicate_body(node, pods=30, kata=kata, runtime_class=runtime_class))
    replies = []
    for decoder in ("msgspec", "stdlib"):
        app = ExtenderApp(
            policy=PolicySettings(),
            source=FileReportSource(report),
            labels=NoLabels(),
            decoder=decoder_named(decoder),
            registry=CollectorRegistry(),
            clock=Clock(),
        )
        replies.append(app.handle(Request("POST", "/volcano/v1.10/predicate", raw)).body)
    assert replies[0] == replies[1]
    passes = node == "worker-2" and (runtime_class is None or kata)
    assert (replies[0] == b'{"status":""}') == passes


annotations = st.builds(
    lambda pairs: Obj(tuple(pairs)),
    st.lists(
        st.tuples(
            st.sampled_from([wire.SENSITIVE_TO, wire.SENSITIVE_TO.upper(), "volcano.sh/task-spec"]),
            st.sampled_from(["cpu", "io=2,cpu", ""]) | wrong,
        ),
        max_size=3,
    ),
)
hinted_pods = obj(metadata=obj(name=text, namespace=text, annotations=annotations), spec=obj(runtimeClassName=text))
prioritize_documents = obj(task=obj(Pod=hinted_pods), nodes=st.lists(obj(Name=text), max_size=3))
kube_documents = obj(Pod=hinted_pods, NodeNames=st.lists(text, max_size=3))


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(doc=prioritize_documents)
def test_msgspec_decoder_reads_prioritize_and_its_hint_as_the_generic_walk(doc):
    raw = dump(doc).encode()
    fast, slow = FAST.volcano_prioritize(raw), GENERIC.volcano_prioritize(raw)
    assert (fast.pod, fast.nodes) == (slow.pod, slow.nodes)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(doc=kube_documents)
def test_msgspec_decoder_reads_kube_args_and_its_hint_as_the_generic_walk(doc):
    raw = dump(doc).encode()
    try:
        slow = GENERIC.kube_args(raw)
    except DecodeError:  # no node list to read: both refuse it (the app answers with `Error`)
        event("no readable node list")
        with pytest.raises(DecodeError):
            FAST.kube_args(raw)
        return
    fast = FAST.kube_args(raw)
    assert (fast.pod, fast.node_names) == (slow.pod, slow.node_names)
