"""The policy's test vectors: inputs, and what :mod:`mco_py.analysis.policy` decides for them.

One table for both languages (``scheduler/policy/testdata/vectors.json``): the Python tests check
that it is what this module makes from today's policy, and the Go tests run every case through
the plugins' policy and report reader and must reach the same verdicts, reasons, states and
scores, bit for bit. A change to either policy without the other therefore fails ``make test``.

    python -m tests.analysis.policy_vectors          # rewrite the table after a policy change
    python -m tests.analysis.policy_vectors --check  # exit 1 when the table is out of date

A case names one of each: plugin arguments (the extender config's keys), a report (a document,
a sharded one with its shard objects, or none with the reason), a time, a pod (runtimeClassName,
sensitive-to annotation) and a node (name, labels or unknown labels). The cases are the cross of
hand-picked edges, sampled with a fixed seed so the file stays small; the sensitivity texts
are checked on their own.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

from mco_py.analysis.policy import (
    IndexedReport,
    PolicySettings,
    ReportState,
    filter_node,
    index_report,
    kube_score,
    node_score,
    parse_sensitivity,
    report_state,
    volcano_score,
)
from mco_py.config.extender import SPEC as EXTENDER
from mco_py.config.loader import load
from mco_py.errors import ReportError
from mco_py.model import SIGNAL_NAMES
from mco_py.report.assemble import gather, index_of, shard_of
from mco_py.report.document import Status, decode, report_of

PATH = Path(__file__).resolve().parents[2] / "scheduler" / "policy" / "testdata" / "vectors.json"
SEED = 20261205
CASES = 600

T0 = 1_796_428_800.0  # 2026-12-05T00:00:00Z
STAMP = "2026-12-05T00:00:00.000Z"

SETTINGS: list[dict[str, Any]] = [
    {},
    {
        "crStatusTTLSeconds": 5,
        "hardConstraints": {"psiIoSomeAvg10Threshold": 20, "psiCpuSomeRate": 50.5, "psiMemoryFullAvg10": None},
        "fallbackWhenCROutdated": False,
        "kataRuntimeClassPrefixes": ["kata", "gvisor-kata"],
        "scoreWeight": 2.5,
        "unknownScore": 0,
        "maxClockSkewSeconds": 0,
    },
    {"hardConstraints": None, "kataRuntimeClassPrefixes": None, "scoreWeight": 0, "unknownScore": 100},
    {
        "hardConstraints": {"bioLatencyP99Ms": 12.5, "psiMemoryFullAvg10": 0.0, "llcMissRate": 0.3},
        "crStatusTTLSeconds": 0.5,
        "scoreWeight": 0.1,
    },
    {"hardConstraints": {"psiIoSomeAvg10": 1e-5, "oomKills": 0}, "unknownScore": 37.5, "kataRuntimeClassPrefixes": []},
]


def _entry(name: str, level: str, score: float, **extra: Any) -> dict[str, Any]:
    return {"name": name, "level": level, "score": score, **extra, "reasons": []}


def _nodes() -> list[dict[str, Any]]:
    """Entries around every edge the policy has."""
    return [
        _entry("quiet", "None", 0),
        _entry("low", "Low", 30.25, dominant="cpu", dimensions={"cpu": {"level": "Low", "score": 30.25}},
               signals={"psiCpuSomeRate": 50.5, "psiIoSomeAvg10": 20, "psiMemoryFullAvg10": 0}),
        _entry("io-hot", "Medium", 55.5, dominant="io",
               dimensions={"io": {"level": "Medium", "score": 55.5}, "cpu": {"level": "None", "score": 10}},
               signals={"psiIoSomeAvg10": 35.123456789, "bioLatencyP99Ms": 12.5000001, "psiCpuSomeRate": 50.50001}),
        _entry("mem-hot", "High", 87.5, dominant="memory",
               dimensions={"memory": {"level": "High", "score": 87.5}, "io": {"level": "Low", "score": 25}},
               signals={"psiMemoryFullAvg10": 0.0001, "oomKills": 3, "llcMissRate": 0.30000000000000004}),
        _entry("half", "Low", 49.5, signals={"psiIoSomeAvg10": 1e-05, "llcMissRate": 0.3}),
        _entry("half-up", "Low", 48.5, dimensions={"cache": {"level": "Low", "score": 48.5}},
               signals={"psiIoSomeAvg10": 1234567.0}),
        _entry("stale", "Unknown", 95, signals={"psiIoSomeAvg10": 99}),
        _entry("nodims", "Medium", 62.25),
        _entry("x-future", "High", 100, dominant="io", dimensions={"io": {"level": "High", "score": 100}},
               signals={"psiIoSomeAvg10": 100, "futureSignal": 5}),
    ]  # fmt: skip


def _status(updated: str, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"lastUpdateTime": updated, "analyzer": {"identity": "a", "rulesVersion": "1"}, "nodes": nodes}


def _shard(generation: int, index: int, count: int, version: int | None, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": f"cluster-g{generation}-{index}"},
        "spec": {"report": "cluster", "generation": generation, "index": index, "count": count},
    }
    if version is not None:
        obj["status"] = {"version": version, "nodes": {n["name"]: n for n in nodes}}
    return obj


def _sharded(changes: dict[str, str | None], *, behind: bool = False) -> dict[str, Any]:
    from mco_py.report.shards import shard_index

    count = 4
    by_shard: list[list[dict[str, Any]]] = [[] for _ in range(count)]
    for n in _nodes():
        by_shard[shard_index(n["name"], count)].append(n)
    shards = [_shard(7, k, count, (k + 1) * 3 - (1 if behind and k == 2 else 0), by_shard[k]) for k in range(count)]
    shards.append(_shard(6, 0, count, 9, [_entry("old-generation", "High", 99)]))  # another generation: ignored
    status = _status(STAMP, [])
    status["shards"] = {"generation": 7, "count": count, "versions": [3, 6, 9, 12], "changes": changes}
    return {"status": status, "shards": shards}


def _reports() -> list[dict[str, Any]]:
    return [
        {"status": _status(STAMP, _nodes())},
        {"status": _status("2026-12-04T23:59:30.250Z", _nodes())},  # 29.75 s old at T0: fresh, stale at TTL 5
        {"status": _status("2026-12-05T00:00:07.500+00:00", _nodes())},  # dated ahead
        {"status": _status(STAMP, [*_nodes(), _entry("quiet", "High", 90, signals={"psiIoSomeAvg10": 50})])},
        {"status": _status(STAMP, [_entry("bad", "High", 101)])},  # out of the schema: unreadable
        {"status": _status("yesterday", [])},
        {"missing": "NodeInterferenceReport cluster does not exist"},
        {"unreadable": "NodeInterferenceReport cluster: cannot be read"},
        {"missing": ""},
        _sharded({"quiet": "High 91.5 io", "low": None, "brand-new": "Medium 60", "stale": "Low 30 cpu"}),
        _sharded({}, behind=True),
    ]


PODS: list[dict[str, Any]] = [
    {"runtimeClass": None, "sensitiveTo": None},
    {"runtimeClass": "kata-qemu", "sensitiveTo": None},
    {"runtimeClass": "gvisor-kata", "sensitiveTo": "io"},
    {"runtimeClass": "runc", "sensitiveTo": "cpu=2,io=1"},
    {"runtimeClass": None, "sensitiveTo": "memory=0.5 ,cache"},
    {"runtimeClass": "kata", "sensitiveTo": "bogus!"},
    {"runtimeClass": None, "sensitiveTo": "gpu"},
]

NODE_LABELS: list[dict[str, str] | None] = [
    None,
    {},
    {"katacontainers.io/kata-runtime": "true"},
    {"katacontainers.io/kata-runtime": "True"},
]
NODE_NAMES = [*(n["name"] for n in _nodes()), "absent", "brand-new"]
NOWS = [T0, T0 + 0.5, T0 + 30.0, T0 + 30.25, T0 + 2.5]

SENSITIVITY_TEXTS = [
    "cpu", "cpu,io", "cpu=2,io=1", " cpu = 2 , io=0.5 ", "", ",,", " , ", "cpu=0", "cpu=-1", "cpu=abc",
    "cpu=1_0", "cpu=1__0", "cpu=_1", "cpu=0x10", "cpu=inf", "cpu=-Infinity", "cpu=nan", "cpu=1e3",
    "cpu=.5", "cpu=5.", "cpu=.", "cpu=1e", "cpu=1e+2", "cpu=1E-2_0", "CPU", "cpu,cpu=3", "a,b,c,d,e,f,g,h",
    "a,b,c,d,e,f,g,h,i", "x" * 257, "x" * 256, "\u00e9", "cpu='x'", "9cpu", "c" * 33, "c" * 32,
    "cpu=\x1c2", "a\u00a0b", "cpu=\u00a0", "cpu=1e400", "cpu=1e-400", "cpu=+2", "cpu=--2", "io=\u2003",
    "a'b\"c", "a'b", "tab\tx", "cpu=\U0001f600", "cpu=\u0663", "\u2028cpu", "cpu==2", "cpu=2=3",
    "cpu=" + "9" * 30, "memory=3,io=1.5,cache=0.75",
]  # fmt: skip


def _settings_doc(settings: PolicySettings) -> dict[str, Any]:
    return {
        "ttlSeconds": settings.ttl_seconds,
        "hardConstraints": [[name, value] for name, value in settings.hard_constraints.items()],
        "fallbackWhenOutdated": settings.fallback_when_outdated,
        "kataPrefixes": list(settings.kata_runtime_class_prefixes),
        "scoreWeight": settings.score_weight,
        "unknownScore": settings.unknown_score,
        "maxClockSkewSeconds": settings.max_clock_skew_seconds,
    }


def _state(report: dict[str, Any], now: float, settings: PolicySettings) -> tuple[ReportState, bool]:
    """The state a reader reaches with ``report`` at ``now``; and whether its detail is the decoder's
    own words (an unreadable document: each language says it its way)."""
    if "missing" in report:
        return report_state(None, now=now, settings=settings, problem=report["missing"]), False
    if "unreadable" in report:
        return report_state(None, now=now, settings=settings, problem=report["unreadable"], unreadable=True), False
    try:
        status = decode(report["status"], Status, "status")
        head = report_of(status)
        index = index_of(status)
    except ReportError as exc:
        return report_state(None, now=now, settings=settings, problem=str(exc), unreadable=True), True
    if index is None:
        return report_state(index_report(head), now=now, settings=settings), False
    by_name, problem = gather(index, [shard_of(obj) for obj in report["shards"]])
    if problem:
        return report_state(None, now=now, settings=settings, problem=problem), False
    return report_state(IndexedReport(head, by_name), now=now, settings=settings), False


def _sensitivity(text: str) -> dict[str, Any]:
    try:
        parsed = parse_sensitivity(text)
    except ValueError as exc:
        return {"text": text, "error": str(exc)}
    return {"text": text, "weights": [[name, weight] for name, weight in parsed.weights]}


def _case(
    settings: PolicySettings, report: dict[str, Any], now: float, pod: dict[str, Any], *, node: str, labels: Any
) -> dict[str, Any]:
    state, decoder_words = _state(report, now, settings)
    sensitivity = None
    if pod["sensitiveTo"] is not None and not state.basic_mode:
        try:
            sensitivity = parse_sensitivity(pod["sensitiveTo"])
        except ValueError:
            sensitivity = None  # scored by the node score ("invalid-hint")
    verdict = filter_node(state, node=node, labels=labels, runtime_class=pod["runtimeClass"], settings=settings)
    raw = node_score(state, node, settings, sensitivity)
    return {
        "fallback": state.fallback.value,
        "detail": None if decoder_words else state.detail,
        "age": state.age_seconds,
        "outdatedInUse": state.outdated_in_use,
        "passed": verdict.passed,
        "rule": verdict.rule,
        "reason": verdict.reason,
        "raw": raw,
        "framework": round(raw),
        "volcano": volcano_score(state, node, settings, sensitivity),
        "kubeExtender": kube_score(state, node, settings, sensitivity),
    }


def build() -> dict[str, Any]:
    """The whole table, from today's policy."""
    settings = [load(EXTENDER, document=doc, source="vector").settings.policy for doc in SETTINGS]
    reports = _reports()
    rng = random.Random(SEED)
    picks = [
        (rng.randrange(len(settings)), rng.randrange(len(reports)), rng.choice(NOWS), rng.randrange(len(PODS)),
         rng.choice(NODE_NAMES), rng.randrange(len(NODE_LABELS)))
        for _ in range(CASES)
    ]  # fmt: skip
    # every node and pod against the fresh report under every setting, too
    picks += [
        (s, 0, T0, p, n, 2 if p % 2 else 1) for s in range(len(settings)) for p in range(len(PODS)) for n in NODE_NAMES
    ]
    cases = []
    for s, r, now, p, node, lab in picks:
        expect = _case(settings[s], reports[r], now, PODS[p], node=node, labels=NODE_LABELS[lab])
        cases.append({"settings": s, "report": r, "now": now, "pod": p, "node": node, "labels": lab, "expect": expect})
    return {
        "about": "Generated by `python -m tests.analysis.policy_vectors` from mco_py/analysis/policy.py; "
        "run by tests/analysis/test_policy_vectors.py and scheduler/policy/vectors_test.go. Do not edit.",
        "signalNames": list(SIGNAL_NAMES),
        "settings": [{"args": doc, "expect": _settings_doc(s)} for doc, s in zip(SETTINGS, settings, strict=True)],
        "reports": reports,
        "pods": PODS,
        "labels": NODE_LABELS,
        "sensitivity": [_sensitivity(text) for text in SENSITIVITY_TEXTS],
        "cases": cases,
    }


def render(table: dict[str, Any]) -> str:
    """The file's text: each list one item per line, so a changed decision is a one-line diff."""

    def compact(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)

    parts = []
    for key, value in table.items():
        if isinstance(value, list):
            items = ",\n  ".join(compact(item) for item in value)
            parts.append(f" {compact(key)}: [\n  {items}\n ]")
        else:
            parts.append(f" {compact(key)}: {compact(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.analysis.policy_vectors", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed table is out of date")
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        current = PATH.read_text(encoding="utf-8") if PATH.exists() else ""
        if current != text:
            print(f"{PATH} is out of date: run python -m tests.analysis.policy_vectors", file=sys.stderr)
            return 1
        return 0
    PATH.parent.mkdir(parents=True, exist_ok=True)
    PATH.write_text(text, encoding="utf-8")
    print(f"wrote {len(json.loads(text)['cases'])} cases to {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
