"""Request decoding: fast and stdlib decoders agree, Go-like keys, and nothing but DecodeError escapes."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mco_py.errors import DecodeError
from mco_py.extender import wire

from . import bodies
from .reference_decoder import StdlibDecoder

DECODERS = [wire.MsgspecDecoder(), StdlibDecoder()]
SENSITIVE_TO = wire.SENSITIVE_TO


def test_fold_get_prefers_exact_then_last_case_insensitive_match():
    assert wire.fold_get({"name": 1, "NAME": 2}, "name") == 1
    assert wire.fold_get({"Name": 1, "NAME": 2}, "name") == 2
    assert wire.fold_get({"x": 1}, "name") is None


@pytest.mark.parametrize("dec", DECODERS, ids=lambda d: d.name)
def test_realistic_predicate(dec):
    body = bodies.dumps(bodies.predicate_body("worker-9", pods=3, kata=True, runtime_class="kata-qemu"))
    req = dec.volcano_predicate(body)
    assert req.pod.runtime_class == "kata-qemu"
    assert req.pod.name == "web-0"
    assert req.pod.namespace == "default"
    assert req.node is not None
    assert req.node.name == "worker-9"
    assert req.node.labels is not None
    assert req.node.labels[bodies.KATA_LABEL] == "true"
    assert req.slow_path is False or dec.name == "stdlib"


def test_fast_path_used_for_volcano_spelling_and_slow_path_for_others():
    dec = wire.MsgspecDecoder()
    body = bodies.predicate_body("w", pods=1)
    assert not dec.volcano_predicate(bodies.dumps(body)).slow_path
    body["node"]["name"] = body["node"].pop("Name")
    req = dec.volcano_predicate(bodies.dumps(body))
    assert req.slow_path
    assert req.node is not None
    assert req.node.name == "w"


def test_node_name_falls_back_to_node_metadata_name():
    body = bodies.predicate_body("w", pods=1)
    del body["node"]["Name"]
    for dec in DECODERS:
        req = dec.volcano_predicate(bodies.dumps(body))
        assert req.node is not None
        assert req.node.name == "w"


def test_missing_pod_means_unknown_runtime_class_not_a_crash():
    for dec in DECODERS:
        req = dec.volcano_predicate(b'{"node": {"Name": "w"}}')
        assert req.pod.runtime_class is None
        assert req.node == wire.NodeRef("w", None)


def test_wrong_types_are_read_as_unknown():
    body = {
        "task": {"Pod": {"spec": {"runtimeClassName": 5}, "metadata": []}},
        "node": {"Name": "w", "Node": {"metadata": {"labels": {"a": 1, "b": "x"}}}},
    }
    for dec in DECODERS:
        req = dec.volcano_predicate(bodies.dumps(body))
        assert req.pod.runtime_class is None
        assert req.node is not None
        assert req.node.labels == {"b": "x"}


@pytest.mark.parametrize("raw", [b"", b"nul", b"[1,2]", b'"x"', b"\xff\xfe", b'{"task":'])
def test_not_an_object_raises_decode_error(raw):
    for dec in DECODERS:
        with pytest.raises(DecodeError):
            dec.volcano_predicate(raw)
        with pytest.raises(DecodeError):
            dec.volcano_prioritize(raw)
        with pytest.raises(DecodeError):
            dec.kube_args(raw)


def test_prioritize_and_kube_args_agree_between_decoders():
    pbody = bodies.dumps(bodies.prioritize_body(5, pods=1))
    kbody = bodies.dumps(bodies.kube_args([bodies.node("a"), bodies.node("b", kata=True)], ["a", "b"]))
    fast, slow = DECODERS
    assert (
        fast.volcano_prioritize(pbody).nodes
        == slow.volcano_prioritize(pbody).nodes
        == tuple(f"worker-{i}" for i in range(5))
    )
    kf, ks = fast.kube_args(kbody), slow.kube_args(kbody)
    assert [(n.name, n.labels) for n in kf.nodes or ()] == [(n.name, n.labels) for n in ks.nodes or ()]
    assert kf.node_names == ks.node_names == ("a", "b")
    # the echoed raw objects encode back to the very same node objects
    assert json.loads(fast.encode([n.raw for n in kf.nodes or ()])) == json.loads(
        slow.encode([n.raw for n in ks.nodes or ()])
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "task",
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
                    "annotations",
                    wire.SENSITIVE_TO,
                    "x",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(doc=json_values, cut=st.integers(min_value=0, max_value=400))
def test_any_json_or_truncation_gives_data_or_decode_error(doc, cut):
    raw = json.dumps(doc).encode()
    for body in (raw, raw[:cut]):
        for dec in DECODERS:
            for fn in (dec.volcano_predicate, dec.volcano_prioritize, dec.kube_args):
                with contextlib.suppress(DecodeError):
                    fn(body)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(doc=json_values)
def test_decoders_agree_on_random_objects(doc):
    if not isinstance(doc, dict):
        return
    raw = json.dumps(doc).encode()
    fast, slow = DECODERS
    a, b = fast.volcano_predicate(raw), slow.volcano_predicate(raw)
    assert (a.pod, a.node) == (b.pod, b.node)
    assert fast.volcano_prioritize(raw).nodes == slow.volcano_prioritize(raw).nodes


def test_the_sensitivity_annotation_is_read_for_scoring_by_both_decoders():
    pbody = bodies.prioritize_body(2, pods=1)
    pbody["task"]["Pod"]["metadata"]["annotations"][SENSITIVE_TO] = "cpu=2,io"
    kbody = bodies.kube_args(None, ["a"])
    kbody["Pod"]["metadata"]["Annotations"] = kbody["Pod"]["metadata"].pop("annotations")  # Go folds field names
    kbody["Pod"]["metadata"]["Annotations"][SENSITIVE_TO] = "memory"
    for dec in DECODERS:
        assert dec.volcano_prioritize(bodies.dumps(pbody)).pod.sensitive_to == "cpu=2,io"
        assert dec.kube_args(bodies.dumps(kbody)).pod.sensitive_to == "memory"
        # a map key is not folded: another spelling of the annotation is not it
        other = bodies.prioritize_body(2, pods=1)
        other["task"]["Pod"]["metadata"]["annotations"][SENSITIVE_TO.upper()] = "cpu"
        assert dec.volcano_prioritize(bodies.dumps(other)).pod.sensitive_to is None
        # predicates do not need it
        predicate = bodies.predicate_body()
        predicate["task"]["Pod"]["metadata"]["annotations"][SENSITIVE_TO] = "cpu"
        assert dec.volcano_predicate(bodies.dumps(predicate)).pod.sensitive_to is None
