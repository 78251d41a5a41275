"""The sharded report, pure: membership, the planner's size policy and writes, and the reader's assembly.

The round-trip tests apply each plan to an in-memory model of the API server's shard objects
(each shard's status replaced whole, then the report object), as
:class:`~mco_py.store.kube.KubeReportStore` sends them, and read the model back as a reader does.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest

from mco_py.errors import ReportError
from mco_py.model import Level, NodeAssessment, Report
from mco_py.report.assemble import (
    Shard,
    ShardAssembler,
    compose,
    index_of,
    shard_of,
)
from mco_py.report.builder import ReportBuilder
from mco_py.report.document import (
    ShardIndex,
    ShardStatus,
    Status,
    decode,
    encoded_size,
    entry,
    report_of,
    to_builtins,
)
from mco_py.report.shards import (
    ShardPlanner,
    change_of,
    parse_change,
    shard_index,
)

LEVELS = (Level.NONE, Level.LOW, Level.MEDIUM, Level.HIGH, Level.UNKNOWN)


def node(i: int, level: Level = Level.LOW, *, score: float = 12.5, t: float = 1000.0) -> NodeAssessment:
    return NodeAssessment(
        name=f"node-{i:05d}",
        level=level,
        score=score,
        signals={"psiCpuSomeAvg10": 1.25, "psiIoSomeAvg10": 3.5, "llcMissRate": 0.01},
        last_sample_time=t,
        reasons=(f"cpu: psiCpuSomeAvg10 1.25 above 1 on node {i}",),
        dominant="cpu",
    )


def report(nodes: list[NodeAssessment], t: float) -> Report:
    return Report(t, "analyzer-0", "v1", tuple(sorted(nodes, key=lambda n: n.name)))


@dataclass
class FakeApi:
    """The shard objects and the report object's status, as the API server would hold them."""

    shards: dict[str, dict[str, Any]] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)
    bytes_written: int = 0

    def publish(self, built: Any, name: str = "cluster") -> None:
        plan = built.shards
        if plan is not None:
            for write in plan.writes:
                key = f"{name}-g{plan.index.generation}-{write.index}"
                if plan.new_generation:
                    self.shards[key] = {
                        "metadata": {"name": key},
                        "spec": {
                            "report": name,
                            "generation": plan.index.generation,
                            "index": write.index,
                            "count": plan.index.count,
                        },
                    }
                self.shards[key]["status"] = to_builtins(ShardStatus(write.version, write.nodes))  # as sent
                self.bytes_written += encoded_size(self.shards[key]["status"])
        self.status = decode(to_builtins(built.status), Status, "status")  # as sent, read back
        self.bytes_written += encoded_size(self.status)
        index = index_of(self.status)
        for key in [k for k, o in self.shards.items() if index is None or o["spec"]["generation"] != index.generation]:
            del self.shards[key]

    def read(self) -> Report:
        head = report_of(self.status)
        index = index_of(self.status)
        if index is None:
            return head
        return compose(head, index, [shard_of(o) for o in self.shards.values()])


def levels(r: Report) -> dict[str, str]:
    return {n.name: n.level.value for n in r.nodes}


def builder(budget: int = 40_000, limit: int = 16_384, refresh: float = 30.0) -> ReportBuilder:
    return ReportBuilder(budget, shards=ShardPlanner(budget, shard_limit=limit, refresh_seconds=refresh))


def test_membership_is_stable_and_doubling_moves_a_node_to_k_or_k_plus_count() -> None:
    names = [f"worker-{i}" for i in range(2000)]
    for count in (2, 4, 64, 1024):
        for name in names:
            k = shard_index(name, count)
            assert 0 <= k < count
            assert shard_index(name, count) == k
            assert shard_index(name, 2 * count) in (k, k + count)


def test_a_report_that_fits_stays_inline_and_looks_as_before() -> None:
    nodes = [node(i) for i in range(20)]
    built = builder().build(report(nodes, 1000.0))
    assert built.shards is None
    assert not built.status.shards
    assert [e.name for e in built.status.nodes] == [n.name for n in sorted(nodes, key=lambda n: n.name)]


def test_a_large_report_is_split_with_every_node_in_full_once_in_its_shard() -> None:
    nodes = [node(i) for i in range(600)]
    b = builder()
    built = b.build(report(nodes, 1000.0))
    plan = built.shards
    assert plan is not None
    assert plan.new_generation
    assert built.status.nodes == []
    assert built.status.shards == plan.index
    assert built.status.summary.nodes == 600
    assert built.status.summary.low == 600
    assert len(plan.writes) == plan.index.count
    assert {w.version for w in plan.writes} == {1}
    seen: dict[str, int] = {}
    for w in plan.writes:
        assert encoded_size({"nodes": w.nodes}) <= 16_384
        for name, e in w.nodes.items():
            assert name not in seen
            seen[name] = w.index
            assert shard_index(name, plan.index.count) == w.index
            assert e == entry(next(n for n in nodes if n.name == name))  # full detail kept
    assert len(seen) == 600
    assert max(plan.sizes) <= 16_384


def test_between_refreshes_level_changes_go_to_the_report_object_and_no_shard_is_written() -> None:
    nodes = {i: node(i) for i in range(600)}
    b = builder(refresh=3000.0)  # no shard due for a whole refresh in these few seconds
    b.build(report(list(nodes.values()), 1000.0))
    # new values but the same levels: nothing to write
    nodes = {i: node(i, score=13.0, t=1001.0) for i in nodes}
    built = b.build(report(list(nodes.values()), 1001.0))
    plan = built.shards
    assert plan is not None
    assert not plan.new_generation
    assert plan.writes == ()
    assert built.status.shards.changes == {}
    nodes[7] = msgspec.structs.replace(node(7, Level.HIGH, t=1002.0), score=87.456, dominant="io")
    del nodes[8]
    nodes[9999] = node(9999)
    built = b.build(report(list(nodes.values()), 1002.0))
    assert built.shards is not None
    assert built.shards.writes == ()
    assert built.status.shards.changes == {
        "node-00007": "High 87.46 io",
        "node-00008": None,
        "node-09999": "Low 12.5 cpu",
    }
    assert built.status.summary.nodes == 600
    assert built.status.summary.high == 1
    # back to the level its shard holds: the change line goes
    nodes[7] = node(7, t=1003.0)
    built = b.build(report(list(nodes.values()), 1003.0))
    assert "node-00007" not in built.status.shards.changes


def test_changes_over_their_budget_write_the_shards_holding_most() -> None:
    nodes = {i: node(i) for i in range(600)}
    b = ReportBuilder(
        40_000, shards=ShardPlanner(40_000, shard_limit=16_384, refresh_seconds=3000.0, changes_budget=2_000)
    )
    first = b.build(report(list(nodes.values()), 1000.0)).shards
    assert first is not None
    for i in range(0, 600, 3):
        nodes[i] = node(i, Level.HIGH, t=1001.0)
    built = b.build(report(list(nodes.values()), 1001.0))
    plan = built.shards
    assert plan is not None
    assert plan.writes
    assert len(plan.writes) < plan.index.count
    assert encoded_size(built.status.shards.changes) <= 2_000
    assert {w.version for w in plan.writes} == {2}
    written = {n for w in plan.writes for n in w.nodes}
    assert not written & set(built.status.shards.changes)  # a written node's change is done


def test_every_shard_is_rewritten_whole_within_the_refresh_period_staggered() -> None:
    nodes = [node(i) for i in range(600)]
    b = builder(refresh=30.0)
    count = b.build(report(nodes, 1000.0)).shards.index.count  # type: ignore[union-attr]
    whole: list[set[int]] = []
    for t in (1005.0, 1010.0, 1015.0, 1020.0, 1025.0, 1030.0):
        plan = b.build(report(nodes, t)).shards
        assert plan is not None
        whole.append({w.index for w in plan.writes})
    assert set().union(*whole) == set(range(count))
    assert max(len(s) for s in whole) < count  # spread over the period, not all at once


def test_round_trip_through_the_api_keeps_every_node_once_through_churn_growth_and_shrinking() -> None:
    rng = random.Random(7)
    api = FakeApi()
    b = builder()
    nodes = {i: node(i) for i in range(300)}
    asm = ShardAssembler()
    counts = set()
    t = 1000.0
    for step in range(60):
        t += 5.0
        if step < 30:  # grow past several doublings
            for i in range(len(nodes), len(nodes) + 40):
                nodes[i] = node(i)
        else:  # shrink back towards inline
            for i in rng.sample(sorted(nodes), min(len(nodes) - 5, 60)):
                del nodes[i]
        for i in rng.sample(sorted(nodes), len(nodes) // 20):  # 5 % change level
            nodes[i] = node(i, rng.choice(LEVELS), t=t)
        built = b.build(report(list(nodes.values()), t))
        api.publish(built)
        got = api.read()
        assert levels(got) == {n.name: n.level.value for n in nodes.values()}
        assert len(got.nodes) == len(nodes)
        index = index_of(api.status)
        if index is not None:  # a reader's map holds the same, however it is asked
            asm.set_shards(shards_of(api))
            asm.set_head(report_of(api.status), index)
            served = asm.report()
            assert served is not None
            assert asm.problem == ""
            view = served[1]
            assert len(view) == len(nodes)
            assert sorted(view) == sorted(n.name for n in got.nodes)
            assert dict(view.items()) == {n.name: n for n in got.nodes}
            assert all(view.get(n.name) is view[n.name] for n in got.nodes)
            assert view.get("no-such-node") is None
            assert "no-such-node" not in view
        index = index_of(api.status)
        counts.add(index.count if index else 0)
        for obj in api.shards.values():
            assert encoded_size(obj["status"]) <= 16_384
        assert encoded_size(api.status) <= 40_000
    assert 0 in counts
    assert len(counts) >= 3


def test_the_way_back_to_inline_has_hysteresis() -> None:
    per_node = encoded_size(entry(node(0))) + len(node(0).name) + 4  # one node's share of the budget
    b = builder(budget=40_000)
    fits = 40_000 // per_node  # about the nodes that fit the budget in full (entries differ by a few bytes)
    assert b.build(report([node(i) for i in range(fits * 19 // 20)], 1000.0)).shards is None  # inline
    assert b.build(report([node(i) for i in range(fits * 21 // 20)], 1005.0)).shards is not None  # over: sharded
    between = [node(i) for i in range(fits * 3 // 4)]  # fits the budget, not half of it
    assert b.build(report(between, 1010.0)).shards is not None  # stays sharded
    assert b.build(report([node(i) for i in range(fits * 2 // 5)], 1015.0)).shards is None  # under half: inline


def test_after_reset_the_next_round_starts_a_new_generation_written_whole() -> None:
    nodes = [node(i) for i in range(600)]
    b = builder()
    first = b.build(report(nodes, 1000.0)).shards
    b.reset()
    again = b.build(report(nodes, 1000.5)).shards
    assert first is not None
    assert again is not None
    assert again.new_generation
    assert again.index.generation > first.index.generation
    assert len(again.writes) == again.index.count


def shards_of(api: FakeApi) -> dict[str, Shard]:
    return {k: shard_of(o) for k, o in api.shards.items()}


def _served(asm: ShardAssembler) -> dict[str, NodeAssessment] | None:
    served = asm.report()
    if served is None:
        return None
    view = served[1]
    assert len(view) == len(dict(view.items()))
    return dict(view.items())


def test_shard_events_one_at_a_time_serve_what_a_fresh_reader_assembles() -> None:
    """A watching reader re-lays only the changes of the shards an event brings; after every event
    it serves what a reader starting afresh with the same objects serves (an oracle for the
    incremental path), through 5 % level changes, nodes gone and new, and refreshes."""
    rng = random.Random(11)
    nodes = {i: node(i) for i in range(800)}
    b = builder(refresh=20.0)  # a few shards due each round: events between report object updates
    api = FakeApi()
    t = 1000.0
    api.publish(b.build(report(list(nodes.values()), t)))
    asm = ShardAssembler()
    held: dict[str, Shard] = {}
    relaid = 0
    for _ in range(12):
        t += 5.0
        for i in rng.sample(sorted(nodes), 40):
            nodes[i] = node(i, rng.choice(LEVELS), t=t)
        for i in rng.sample(sorted(nodes), 5):
            del nodes[i]
        nodes[10_000 + int(t)] = node(10_000 + int(t))
        head = report_of(api.status) if asm.report() is not None else None
        old_index = index_of(api.status) if head is not None else None
        api.publish(b.build(report(list(nodes.values()), t)))
        latest = shards_of(api)
        for key in rng.sample(sorted(latest), len(latest)):  # the shards come first, in any order
            if key in held and held[key].version == latest[key].version:
                continue
            held = {**held, key: latest[key]}
            asm.set_shards(held)
            relaid += 1
            if head is not None and old_index is not None:  # laid under the report object readers still have
                fresh = ShardAssembler()
                fresh.set_shards(held)
                fresh.set_head(head, old_index)
                assert asm.problem == fresh.problem
                if not fresh.problem:
                    assert _served(asm) == _served(fresh)
        index = index_of(api.status)
        assert index is not None
        asm.set_head(report_of(api.status), index)  # then the report object
        assert _served(asm) == {n.name: n for n in api.read().nodes}
    assert relaid > 12 * 2


def test_a_reader_keeps_the_old_generation_until_the_new_one_is_whole() -> None:
    api = FakeApi()
    b = builder()
    nodes = [node(i) for i in range(600)]
    api.publish(b.build(report(nodes, 1000.0)))
    old_shards = shards_of(api)
    asm = ShardAssembler()
    asm.set_shards(old_shards)
    asm.set_head(report_of(api.status), index_of(api.status))  # type: ignore[arg-type]
    served = asm.report()
    assert served is not None
    assert set(served[1]) == {n.name for n in nodes}
    # the analyzer restarts: a new generation; the reader sees the new index before the new shards
    b.reset()
    changed = [node(i, Level.HIGH, t=1005.0) if i % 2 else node(i) for i in range(600)]
    api.publish(b.build(report(changed, 1005.0)))
    asm.set_head(report_of(api.status), index_of(api.status))  # type: ignore[arg-type]
    assert asm.problem.startswith("report generation")
    served = asm.report()
    assert served is not None
    assert {n.level for n in served[1].values()} == {Level.LOW}
    assert served[0].last_update_time == 1000.0  # dated by the last index naming that generation: ages out
    new_shards = shards_of(api)
    partial = {**old_shards, **dict(list(new_shards.items())[:2])}
    asm.set_shards(partial)
    served = asm.report()
    assert served is not None
    assert len(served[1]) == 600
    assert {n.level for n in served[1].values()} == {Level.LOW}
    asm.set_shards(new_shards)  # old ones deleted, new ones whole
    served = asm.report()
    assert served is not None
    assert asm.problem == ""
    assert len(served[1]) == 600
    assert served[0].nodes == ()
    assert {n.name: n.level for n in served[1].values()} == {n.name: n.level for n in changed}
    assert served[0].last_update_time == 1005.0


def test_a_reader_lays_changes_over_the_shards_and_waits_for_shards_the_index_says_are_newer() -> None:
    api = FakeApi()
    b = builder(refresh=3000.0)
    nodes = {i: node(i) for i in range(600)}
    api.publish(b.build(report(list(nodes.values()), 1000.0)))
    asm = ShardAssembler()
    asm.set_shards(shards_of(api))
    asm.set_head(report_of(api.status), index_of(api.status))  # type: ignore[arg-type]
    nodes[3] = node(3, Level.HIGH, t=1001.0)
    api.publish(b.build(report(list(nodes.values()), 1001.0)))
    asm.set_head(report_of(api.status), index_of(api.status))  # type: ignore[arg-type]
    served = asm.report()
    assert served is not None
    assert len(served[1]) == 600
    assert served[1]["node-00003"].level is Level.HIGH
    assert served[1]["node-00003"].reasons == nodes[3].reasons  # the detail from its shard
    # the shard holding node 3 is rewritten; the reader sees the report object first
    b.shards.refresh_seconds = 0  # type: ignore[union-attr]
    nodes[3] = node(3, Level.MEDIUM, t=1002.0)
    old_shards = shards_of(api)
    api.publish(b.build(report(list(nodes.values()), 1002.0)))
    assert index_of(api.status).changes == {}  # type: ignore[union-attr]
    asm.set_head(report_of(api.status), index_of(api.status))  # type: ignore[arg-type]
    assert "older than the report names" in asm.problem
    served = asm.report()
    assert served is not None
    assert served[1]["node-00003"].level is Level.HIGH
    asm.set_shards(shards_of(api))
    served = asm.report()
    assert served is not None
    assert asm.problem == ""
    assert served[1]["node-00003"].level is Level.MEDIUM
    assert len(served[1]) == 600
    assert old_shards


def test_bad_index_and_bad_shards_are_named() -> None:
    def index(shards: object) -> ShardIndex | None:
        return index_of(decode({"lastUpdateTime": "2026-12-03T10:00:00Z", "shards": shards}, Status, "status"))

    with pytest.raises(ReportError, match=r"^status: shards.count must be 0 or a power of two, not 3 - at `shards`"):
        index({"generation": 1, "count": 3, "versions": [1, 1, 1]})
    with pytest.raises(ReportError, match=r"^status: Expected `object`, got `array` - at `shards`"):
        index([1])
    with pytest.raises(ReportError, match=r"shards.versions must hold 2 versions, one per shard"):
        index({"generation": 1, "count": 2, "versions": [1]})
    with pytest.raises(ReportError, match=r"Expected `str \| null`, got `int` - at `shards.changes\[...\]`"):
        index({"generation": 1, "count": 2, "versions": [1, 1], "changes": {"a": 3}})
    with pytest.raises(ReportError, match=r"Expected `int` >= 0 - at `shards.generation`"):
        index({"generation": -1, "count": 0})
    assert index({"generation": 1, "count": 0}) is None
    assert index({"generation": 1, "count": 2, "versions": [1, 1]}) == ShardIndex(1, 2, (1, 1))
    spec = {"generation": 1, "index": 0, "count": 2}
    bad = shard_of(
        {
            "metadata": {"name": "cluster-g1-0"},
            "spec": spec,
            "status": {"version": 1, "nodes": {"a": {"level": "Loud"}}},
        }
    )
    assert bad.problem.startswith("NodeInterferenceReportShard cluster-g1-0: status.nodes[a]")
    unwritten = shard_of({"metadata": {"name": "x"}, "spec": spec})  # created, not written yet: behind
    assert (unwritten.problem, unwritten.version, unwritten.nodes) == ("", 0, {})
    assert (
        "status: Object missing required field `version`"
        in shard_of({"metadata": {"name": "x"}, "spec": spec, "status": {"nodes": {}}}).problem
    )
    assert "spec" in shard_of({"metadata": {"name": "x"}}).problem
    good = shard_of({"metadata": {"name": "y"}, "spec": {**spec, "index": 1}, "status": {"version": 1, "nodes": {}}})
    head = Report(1.0, "a", "v")
    with pytest.raises(ReportError, match="NodeInterferenceReportShard cluster-g1-0"):
        compose(head, ShardIndex(1, 2, (1, 1)), [bad, good])
    with pytest.raises(ReportError, match=r"1 of 2 shards missing or older than the report names \(0\)"):
        compose(head, ShardIndex(1, 2, (1, 1)), [good])
    with pytest.raises(ReportError, match=r"1 of 2 shards missing or older .* \(1\)"):
        compose(
            head,
            ShardIndex(1, 2, (0, 2)),
            [shard_of({"metadata": {"name": "z"}, "spec": spec, "status": {"version": 1, "nodes": {}}}), good],
        )
    with pytest.raises(ReportError, match=r"changes\[n\]: 'Loud 3'"):
        compose(
            head,
            ShardIndex(1, 2, (0, 0), {"n": "Loud 3"}),
            [shard_of({"metadata": {"name": "z"}, "spec": spec, "status": {"version": 0, "nodes": {}}}), good],
        )
    assert change_of(node(1, Level.HIGH, score=100.0)) == "High 100 cpu"
    assert parse_change("n", "High 100 cpu") == NodeAssessment("n", Level.HIGH, 100.0, {}, None, (), "cpu")
