"""The NodeInterferenceReport CRD is the contract between analyzer and readers."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from mco_py import model
from mco_py.model import DimensionScore, Level, NodeAssessment, Report
from mco_py.report.document import ShardSpec, ShardStatus, Status, decode, report_of, status_of, to_builtins
from tests.contracts import crd_schema

SAMPLE = json.loads((Path(__file__).parent / "sample_report.json").read_text())


def test_crd_identity() -> None:
    crd = crd_schema.load_crd()
    assert crd["metadata"]["name"] == f"{model.PLURAL}.{model.GROUP}"
    spec = crd["spec"]
    assert spec["scope"] == "Cluster"
    assert spec["names"]["kind"] == model.KIND
    assert "nir" in spec["names"]["shortNames"]
    (version,) = spec["versions"]
    assert version["name"] == model.VERSION
    assert (version["served"], version["storage"]) == (True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Updated"] == ".status.lastUpdateTime"
    assert columns["Nodes"] == ".status.summary.nodes"


def test_sample_report_is_valid() -> None:
    assert crd_schema.errors(SAMPLE) == []


def test_schema_enumerates_every_report_signal() -> None:
    props = crd_schema.schema_for()["properties"]["status"]["properties"]["nodes"]["items"]["properties"]
    assert set(props["signals"]["properties"]) == set(model.SIGNAL_NAMES)
    assert props["level"]["enum"] == [lv.value for lv in Level]


@pytest.mark.parametrize(
    "path",
    [
        ("status", "lastUpdateTime"),
        ("status", "analyzer"),
        ("status", "nodes"),
        ("status", "analyzer", "identity"),
        ("status", "nodes", 0, "name"),
        ("status", "nodes", 0, "level"),
        ("status", "nodes", 0, "score"),
    ],
)
def test_removing_a_required_field_is_rejected(path: tuple[Any, ...]) -> None:
    doc = copy.deepcopy(SAMPLE)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    problems = crd_schema.errors(doc)
    assert problems, f"removing {'.'.join(map(str, path))} must be rejected"
    assert any(f"'{path[-1]}' is a required property" in p for p in problems)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["status"]["nodes"][0].update(level="Severe"), "is not one of"),
        (lambda d: d["status"]["nodes"][0].update(score=101), "greater than the maximum"),
        (lambda d: d["status"]["nodes"][0].update(score="high"), "is not of type 'number'"),
        (lambda d: d["status"]["nodes"][0]["signals"].update(llcMissRate=1.5), "greater than the maximum"),
        (lambda d: d["status"]["nodes"][0]["signals"].update(psiIoSomeAvg10=-1), "less than the minimum"),
        (lambda d: d["status"].update(lastUpdateTime="yesterday"), "is not a 'date-time'"),
        (lambda d: d["status"]["nodes"][0].update(reasons="not a list"), "is not of type 'array'"),
        (lambda d: d["status"]["nodes"][0]["dimensions"]["io"].update(level="Unknown"), "is not one of"),
        (lambda d: d["status"]["nodes"][0]["dimensions"]["io"].update(score=140), "greater than the maximum"),
        (lambda d: d["status"]["nodes"][0]["dimensions"].update(gpu={"score": 1}), "'level' is a required property"),
        (lambda d: d["status"]["nodes"][0]["signals"].update(psiCpuSomeRate=101), "greater than the maximum"),
    ],
)
def test_bad_values_are_rejected(mutate: Any, expected: str) -> None:
    doc = copy.deepcopy(SAMPLE)
    mutate(doc)
    problems = crd_schema.errors(doc)
    assert any(expected in p for p in problems), problems


def test_report_written_by_the_model_validates_and_round_trips() -> None:
    report = Report(
        last_update_time=1_800_000_000.25,
        analyzer_identity="ctl-1",
        rules_version="2026.11.1",
        nodes=(
            NodeAssessment(
                name="n1",
                level=Level.MEDIUM,
                score=55.5,
                signals={"psiCpuSomeAvg10": 35.0, "cpuStealPercent": 2.0},
                last_sample_time=1_800_000_000.0,
                reasons=("psiCpuSomeAvg10=35.0 between warn 20 and critical 50",),
                dominant="cpu",
                dimensions={"cpu": DimensionScore(Level.MEDIUM, 55.5), "io": DimensionScore(Level.NONE, 3.25)},
            ),
            NodeAssessment(name="n2", level=Level.UNKNOWN, score=0.0, reasons=("no sample for 31 s",)),
        ),
    )
    status = to_builtins(status_of(report))
    doc = {"apiVersion": f"{model.GROUP}/{model.VERSION}", "kind": model.KIND, "metadata": {"name": "cluster"}}
    assert crd_schema.errors({**doc, "status": status}) == []
    assert status["summary"] == {
        "nodes": 2,
        "detailDropped": 0,
        "none": 0,
        "low": 0,
        "medium": 1,
        "high": 0,
        "unknown": 1,
    }
    back = report_of(decode(status, Status, "status"))
    assert back.nodes[0].level is Level.MEDIUM
    assert back.nodes[0].signals == {"psiCpuSomeAvg10": 35.0, "cpuStealPercent": 2.0}
    assert back.nodes[0] == report.nodes[0]
    assert (back.nodes[1].dominant, back.nodes[1].dimensions) == ("", {})
    assert back.nodes[1].last_sample_time is None
    assert abs(back.last_update_time - report.last_update_time) < 0.001


def test_the_shard_crd_holds_the_same_entry_as_the_report() -> None:
    """A shard's ``status.nodes`` values follow the report's ``status.nodes[]`` schema exactly, and its
    map is atomic (one managedFields line, not one per node and field: half the object's size)."""
    import yaml

    from mco_py.report.shards import SHARD_KIND, SHARD_PLURAL

    report = crd_schema.load_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    shard_crd = yaml.safe_load((crd_schema.CRD_PATH.parent / f"{SHARD_PLURAL}.yaml").read_text())
    assert shard_crd["metadata"]["name"] == f"{SHARD_PLURAL}.{model.GROUP}"
    assert shard_crd["spec"]["names"]["kind"] == SHARD_KIND
    assert shard_crd["spec"]["scope"] == "Cluster"
    (version,) = shard_crd["spec"]["versions"]
    assert (version["name"], version["subresources"]) == (model.VERSION, {"status": {}})
    nodes = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["nodes"]
    assert nodes["additionalProperties"] == report["properties"]["status"]["properties"]["nodes"]["items"]
    assert nodes["x-kubernetes-map-type"] == "atomic"
    shards = report["properties"]["status"]["properties"]["shards"]
    assert set(shards["properties"]) == {"generation", "count", "versions", "changes"}


_CONSTRAINTS = ("type", "minimum", "maximum", "minLength", "maxLength", "maxItems", "maxProperties", "nullable")


def _ours(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A msgspec JSON schema node with its ``$ref`` resolved and ``X | None`` as ``nullable``."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[1]]
    if "anyOf" in schema:
        (kept,) = [s for s in schema["anyOf"] if s.get("type") != "null"]
        schema = {**_ours(kept, defs), "nullable": True}
    if "enum" in schema and "type" not in schema:
        schema = {**schema, "type": "string"}
    return schema


_LEFT_TO_THE_API_SERVER = {("status.nodes", "maxItems")}
"""The report object's entry cap: the standalone file has none (and the API server holds a report
object to it)."""


def _mirror_problems(crd: dict[str, Any], ours: dict[str, Any], defs: dict[str, Any], path: str) -> list[str]:
    """Where the struct's schema and the CRD's differ: a field, a type or a constraint (the struct
    may require less: a reader takes what the API server would accept; beyond the schema,
    ``ShardIndex`` also checks what it cannot say: a power-of-two count, one version per shard)."""
    ours = _ours(ours, defs)
    problems = [
        f"{path}: {key} {crd.get(key)!r} in the CRD, {ours.get(key)!r} in the struct"
        for key in _CONSTRAINTS
        if crd.get(key) != ours.get(key) and (path, key) not in _LEFT_TO_THE_API_SERVER
    ]
    if sorted(crd.get("enum", [])) != sorted(ours.get("enum", [])):
        problems.append(f"{path}: enum {crd.get('enum')} in the CRD, {ours.get('enum')} in the struct")
    if not set(ours.get("required", [])) <= set(crd.get("required", [])):
        problems.append(f"{path}: the struct requires {ours['required']}, the CRD {crd.get('required')}")
    if path.endswith(".signals"):  # named signals in the CRD (checked above); a name -> number map here
        return problems
    crd_props, our_props = crd.get("properties", {}), ours.get("properties", {})
    if set(crd_props) != set(our_props):
        problems.append(f"{path}: fields {sorted(crd_props)} in the CRD, {sorted(our_props)} in the struct")
    for name in set(crd_props) & set(our_props):
        problems += _mirror_problems(crd_props[name], our_props[name], defs, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if key in crd or key in ours:
            problems += _mirror_problems(crd.get(key, {}), ours.get(key, {}), defs, f"{path}.{key}")
    return problems


@pytest.mark.parametrize(
    ("crd_file", "field", "struct"),
    [
        (f"{model.PLURAL}.yaml", "status", Status),
        ("nodeinterferencereportshards.yaml", "status", ShardStatus),
        ("nodeinterferencereportshards.yaml", "spec", ShardSpec),
    ],
)
def test_the_document_structs_mirror_the_crd_schema(crd_file: str, field: str, struct: type) -> None:
    """The structs that encode and decode the report have the CRD's fields, types and limits: what the
    analyzer writes the API server accepts, and a reader checks what the API server would."""
    import msgspec
    import yaml

    crd = yaml.safe_load((crd_schema.CRD_PATH.parent / crd_file).read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][field]
    ours = msgspec.json.schema(struct)
    assert _mirror_problems(schema, ours, ours["$defs"], field) == []
