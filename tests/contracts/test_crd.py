"""The NodeInterferenceReport CRD is the contract between analyzer and readers."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from mco_py import model
from mco_py.model import DimensionScore, Level, NodeAssessment, Report
from mco_py.report.document import report_of, status_of
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
    status = status_of(report)
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
    back = report_of(status)
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
