"""Editing our extender entry in the real volcano-scheduler.conf of v1.9.0 and v1.12.4."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.roles.helpers import load_module

conf_mod = load_module("plugins/filter/volcano_conf.py", "volcano_conf")
FIXTURES = (
    Path(os.environ.get("MCO_SHARED_FIXTURES", Path(__file__).resolve().parents[3] / "shared" / "fixtures")) / "volcano"
)
VERSIONS = ["v1.9.0", "v1.12.4"]
PREFIX = "http://mco-scheduler-extender.mco-system.svc:9879/volcano/"


def _args(version: str = "v1.9") -> dict[str, Any]:
    return {
        "extender.urlPrefix": PREFIX + version,
        "extender.httpTimeout": "1s",
        "extender.predicateVerb": "predicate",
        "extender.prioritizeVerb": "prioritize",
        "extender.ignorable": True,
    }


def _fixture_conf(version: str) -> str:
    path = FIXTURES / version / "volcano-development.yaml"
    if not path.exists():
        pytest.skip(f"fixture {path} not present (set MCO_SHARED_FIXTURES)")
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc.get("kind") == "ConfigMap" and doc["metadata"]["name"] == "volcano-scheduler-configmap":
            return str(doc["data"]["volcano-scheduler.conf"])
    raise AssertionError("no volcano-scheduler-configmap in fixture")


def _plugins(conf: str, tier: int) -> list[dict[str, Any]]:
    return list(yaml.safe_load(conf)["tiers"][tier]["plugins"])


@pytest.mark.parametrize("version", VERSIONS)
def test_insert_goes_into_the_predicates_tier_and_keeps_every_byte(version: str) -> None:
    conf = _fixture_conf(version)
    out = conf_mod.set_extender(conf, _args(), PREFIX)
    assert out.startswith(conf)  # original text untouched, entry appended after the tier's last plugin
    plugins = _plugins(out, 1)
    assert plugins[:-1] == _plugins(conf, 1)
    assert plugins[-1] == {"name": "extender", "arguments": _args()}
    assert plugins[-1]["arguments"]["extender.ignorable"] is True  # a YAML bool, not a string
    assert _plugins(out, 0) == _plugins(conf, 0)
    assert yaml.safe_load(out)["actions"] == yaml.safe_load(conf)["actions"]


@pytest.mark.parametrize("version", VERSIONS)
def test_second_run_is_identity(version: str) -> None:
    once = conf_mod.set_extender(_fixture_conf(version), _args(), PREFIX)
    assert conf_mod.set_extender(once, _args(), PREFIX) is once


@pytest.mark.parametrize("version", VERSIONS)
def test_update_changes_only_the_extender_lines(version: str) -> None:
    conf = _fixture_conf(version)
    once = conf_mod.set_extender(conf, _args("v1.9"), PREFIX)
    updated = conf_mod.set_extender(once, _args("v1.10"), PREFIX)
    assert updated.startswith(conf)
    changed = [(a, b) for a, b in zip(once.splitlines(), updated.splitlines(), strict=True) if a != b]
    assert changed == [
        (f"      extender.urlPrefix: {PREFIX}v1.9", f"      extender.urlPrefix: {PREFIX}v1.10"),
    ]


def test_comments_and_quoting_elsewhere_survive() -> None:
    conf = (
        "# operator notes\n"
        'actions: "enqueue, allocate, backfill"   # keep\n'
        "tiers:\n"
        "- plugins:\n"
        "  - name: priority\n"
        "- plugins:\n"
        "  - name: predicates\n"
        "    arguments:\n"
        "      predicate.GPUSharingEnable: 'false'  # quoted on purpose\n"
        "  # extender goes below\n"
        "  - name: extender\n"
        "    arguments:\n"
        f"      extender.urlPrefix: {PREFIX}v1.9\n"
        "      extender.ignorable: false\n"
        "\n"
        "  - name: nodeorder\n"
        "    arguments:\n"
        "      nodeaffinity.weight: 2\n"
    )
    out = conf_mod.set_extender(conf, _args("v1.10"), PREFIX)
    head, _tail = conf.split("  - name: extender\n")
    assert out.startswith(head)
    assert out.endswith("\n\n  - name: nodeorder\n    arguments:\n      nodeaffinity.weight: 2\n")
    assert [p["name"] for p in _plugins(out, 1)] == ["predicates", "extender", "nodeorder"]
    assert _plugins(out, 1)[1]["arguments"] == _args("v1.10")


def test_indentless_sequences_keep_their_style() -> None:
    conf = "tiers:\n- plugins:\n  - name: a\n- plugins:\n    - name: predicates\n    - name: nodeorder\n"
    out = conf_mod.set_extender(conf, _args(), PREFIX)
    assert out.startswith(conf)
    assert out[len(conf) :].startswith("    - name: extender\n      arguments:\n")


def test_entry_in_the_wrong_tier_moves_to_the_predicates_tier() -> None:
    conf = (
        "tiers:\n- plugins:\n  - name: gang\n  - name: extender\n    arguments:\n"
        f"      extender.urlPrefix: {PREFIX}v1.9\n- plugins:\n  - name: predicates\n"
    )
    out = conf_mod.set_extender(conf, _args(), PREFIX)
    assert _plugins(out, 0) == [{"name": "gang"}]
    assert _plugins(out, 1)[-1] == {"name": "extender", "arguments": _args()}


def test_foreign_extender_is_refused_with_the_variable_to_set() -> None:
    foreign = "tiers:\n- plugins:\n  - name: predicates\n  - name: extender\n    arguments:\n      extender.urlPrefix: http://other:8888\n"
    with pytest.raises(conf_mod.VolcanoConfError, match=r"http://other:8888.*volcano_extender_replace_existing"):
        conf_mod.set_extender(foreign, _args(), PREFIX)
    replaced = conf_mod.set_extender(foreign, _args(), PREFIX, replace_foreign=True)
    assert _plugins(replaced, 0) == [{"name": "predicates"}, {"name": "extender", "arguments": _args()}]


def test_find_reports_foreign_entry() -> None:
    found = conf_mod.find_extender(
        "tiers:\n- plugins:\n  - name: x\n- plugins:\n  - name: extender\n    arguments: {extender.urlPrefix: http://o}\n"
    )
    assert found == {
        "found": True,
        "tier": 1,
        "index": 0,
        "arguments": {"extender.urlPrefix": "http://o"},
        "url_prefix": "http://o",
        "target_tier": 1,
    }


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ("actions: x\n", "no 'tiers' list"),
        ("tiers: [\n", "not valid YAML"),
        ("- a\n", "must be a YAML mapping"),
        ("tiers:\n- plugins:\n  - name: extender\n  - name: extender\n", "2 'extender' entries"),
    ],
)
def test_bad_conf_gives_a_clear_error(conf: str, message: str) -> None:
    with pytest.raises(conf_mod.VolcanoConfError, match=message):
        conf_mod.set_extender(conf, _args(), PREFIX)


def test_flow_style_plugins_fall_back_to_a_full_dump() -> None:
    conf = "tiers:\n- plugins: [{name: a}]\n- plugins: [{name: predicates}, {name: nodeorder}]\n"
    out = conf_mod.set_extender(conf, _args(), PREFIX)
    assert _plugins(out, 1) == [
        {"name": "predicates"},
        {"name": "nodeorder"},
        {"name": "extender", "arguments": _args()},
    ]
    assert _plugins(out, 0) == [{"name": "a"}]


names = st.sampled_from(["priority", "gang", "drf", "proportion", "binpack", "overcommit", "nodeorder", "predicates"])


@settings(max_examples=60, deadline=None)
@given(
    tier0=st.lists(names, min_size=1, max_size=4),
    tier1=st.lists(names, min_size=1, max_size=6),
    indent=st.sampled_from(["  ", "    ", "      "]),
    with_args=st.booleans(),
)
def test_generated_confs_keep_other_plugins_and_are_idempotent(
    tier0: list[str], tier1: list[str], indent: str, with_args: bool
) -> None:
    def tier(items: list[str]) -> str:
        body = "".join(
            f"{indent}- name: {n}\n" + (f"{indent}  arguments:\n{indent}    {n}.weight: 3\n" if with_args else "")
            for n in items
        )
        return "- plugins:\n" + body

    conf = 'actions: "enqueue, allocate"\ntiers:\n' + tier(tier0) + tier(tier1)
    out = conf_mod.set_extender(conf, _args(), PREFIX)
    parsed_before = yaml.safe_load(conf)["tiers"]
    parsed_after = yaml.safe_load(out)["tiers"]
    target = conf_mod.find_extender(conf)["target_tier"]
    for index, before in enumerate(parsed_before):
        after = parsed_after[index]["plugins"]
        if index == target:
            assert after[:-1] == before["plugins"]
            assert after[-1] == {"name": "extender", "arguments": _args()}
        else:
            assert after == before["plugins"]
    assert conf_mod.set_extender(out, _args(), PREFIX) == out
    # uninstall: taking our entry out gives back every byte of the conf we were given
    assert conf_mod.remove_extender(out, PREFIX) == conf


@pytest.mark.parametrize("version", VERSIONS)
def test_remove_gives_back_the_upstream_conf_byte_for_byte(version: str) -> None:
    conf = _fixture_conf(version)
    with_ours = conf_mod.set_extender(conf, _args(), PREFIX)
    assert conf_mod.remove_extender(with_ours, PREFIX) == conf
    assert conf_mod.remove_extender(conf, PREFIX) is conf  # nothing of ours: untouched


def test_remove_keeps_a_foreign_extender_and_the_operators_comments() -> None:
    foreign = "tiers:\n- plugins:\n  - name: predicates\n  - name: extender\n    arguments:\n      extender.urlPrefix: http://other:8888\n"
    assert conf_mod.remove_extender(foreign, PREFIX) is foreign
    conf = (
        "# operator notes\ntiers:\n- plugins:\n  - name: predicates  # keep\n"
        f"  - name: extender\n    arguments:\n      extender.urlPrefix: {PREFIX}v1.10\n"
        "  # after\n  - name: nodeorder\n"
    )
    assert conf_mod.remove_extender(conf, PREFIX) == (
        "# operator notes\ntiers:\n- plugins:\n  - name: predicates  # keep\n  # after\n  - name: nodeorder\n"
    )


def test_remove_refuses_to_leave_a_tier_without_plugins() -> None:
    conf = f"tiers:\n- plugins:\n  - name: extender\n    arguments:\n      extender.urlPrefix: {PREFIX}v1.9\n"
    with pytest.raises(conf_mod.VolcanoConfError, match="only plugin of tier 0"):
        conf_mod.remove_extender(conf, PREFIX)
