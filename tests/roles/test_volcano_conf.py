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
        "ours": False,
    }


def test_an_https_entry_with_credentials_is_ours_and_its_password_never_leaves_the_filter() -> None:
    """Switching the extender to HTTPS and basic auth updates MCO's entry (not a foreign one), and what the
    find filter hands the play (facts, messages) carries no password."""
    host = "mco-scheduler-extender.mco-system.svc"
    https = conf_mod.extender_url("https", host, 9879, "volcano/v1.10", "volcano", "p@ss/w:rd")
    assert https == "https://volcano:p%40ss%2Fw%3Ard@mco-scheduler-extender.mco-system.svc:9879/volcano/v1.10"
    upstream = _fixture_conf("v1.12.4")
    plain = conf_mod.set_extender(upstream, _args("v1.10"), PREFIX)
    secured = conf_mod.set_extender(plain, {**_args("v1.10"), "extender.urlPrefix": https}, PREFIX)
    assert _plugins(secured, 1)[-1]["arguments"]["extender.urlPrefix"] == https
    found = conf_mod.find_extender(secured, PREFIX)
    assert found["ours"] is True
    assert found["url_prefix"] == "https://volcano:***@mco-scheduler-extender.mco-system.svc:9879/volcano/v1.10"
    assert "p%40ss" not in repr(found)
    # and back to plain HTTP: the same entry, no credentials left
    assert conf_mod.set_extender(secured, _args("v1.10"), PREFIX) == plain
    assert conf_mod.remove_extender(secured, PREFIX) == upstream
    # someone else's HTTPS extender is still foreign, and its password is not in the message
    foreign = secured.replace("mco-scheduler-extender.mco-system.svc:9879", "other:8443")
    assert conf_mod.find_extender(foreign, PREFIX)["ours"] is False
    with pytest.raises(conf_mod.VolcanoConfError, match=r"https://volcano:\*\*\*@other:8443") as err:
        conf_mod.set_extender(foreign, _args("v1.10"), PREFIX)
    assert "p%40ss" not in str(err.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("ftp", "h", 1, "p"), "http or https"),
        (("https", "h", 1, "p", "volcano", ""), "together"),
        (("https", "h", 1, "p", "", "secret"), "together"),
    ],
)
def test_a_bad_extender_url_is_refused(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(conf_mod.VolcanoConfError, match=message):
        conf_mod.extender_url(*args)


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


# -- mco-plugin: the entry of MCO's vc-scheduler build (plugin mode) ----------------------------------

PLUGIN_ARGS: dict[str, Any] = {
    "crName": "cluster",
    "crStatusTTLSeconds": 30,
    "fallbackWhenCROutdated": True,
    "hardConstraints": {"psiMemoryFullAvg10": 0.0, "psiIoSomeAvg10Threshold": 20.0},
}
PLUGIN_LINES = (
    "  - name: mco-plugin\n"
    "    arguments:\n"
    "      crName: cluster\n"
    "      crStatusTTLSeconds: 30\n"
    "      fallbackWhenCROutdated: true\n"
    "      hardConstraints: {psiMemoryFullAvg10: 0.0, psiIoSomeAvg10Threshold: 20.0}\n"
)


@pytest.mark.parametrize("version", VERSIONS)
def test_plugin_entry_goes_last_into_the_predicates_tier_as_the_design_writes_it(version: str) -> None:
    conf = _fixture_conf(version)
    out = conf_mod.set_plugin(conf, PLUGIN_ARGS)
    assert out == conf + PLUGIN_LINES  # the stock conf ends with the second tier: every byte kept, entry appended
    assert _plugins(out, 1)[-1] == {"name": "mco-plugin", "arguments": PLUGIN_ARGS}
    assert conf_mod.find_plugin(out) == {
        "found": True,
        "tier": 1,
        "index": len(_plugins(conf, 1)),
        "arguments": PLUGIN_ARGS,
        "target_tier": 1,
    }
    assert conf_mod.set_plugin(out, PLUGIN_ARGS) is out  # second run: identity
    assert conf_mod.remove_plugin(out) == conf  # uninstall: byte for byte
    assert conf_mod.remove_plugin(conf) is conf  # nothing of ours: untouched


def test_plugin_update_changes_only_the_lines_of_changed_arguments() -> None:
    conf = _fixture_conf("v1.12.4")
    once = conf_mod.set_plugin(conf, PLUGIN_ARGS)
    updated = conf_mod.set_plugin(once, {**PLUGIN_ARGS, "crStatusTTLSeconds": 20.0, "scoreWeight": 2.0})
    assert updated.startswith(conf)
    assert updated.removeprefix(conf).splitlines()[3:] == [
        "      crStatusTTLSeconds: 20.0",
        "      fallbackWhenCROutdated: true",
        "      hardConstraints: {psiMemoryFullAvg10: 0.0, psiIoSomeAvg10Threshold: 20.0}",
        "      scoreWeight: 2.0",
    ]


def test_plugin_without_arguments_is_one_line_and_nulls_and_lists_stay_yaml() -> None:
    conf = "tiers:\n- plugins:\n  - name: priority\n- plugins:\n  - name: predicates\n"
    bare = conf_mod.set_plugin(conf, {})
    assert bare == conf + "  - name: mco-plugin\n"
    assert conf_mod.find_plugin(bare)["arguments"] == {}
    args = {"hardConstraints": {"psiMemoryFullAvg10": None}, "kataRuntimeClassPrefixes": ["kata", "kata-fc"]}
    out = conf_mod.set_plugin(bare, args)
    assert out.endswith(
        "  - name: mco-plugin\n    arguments:\n      hardConstraints: {psiMemoryFullAvg10: null}\n"
        "      kataRuntimeClassPrefixes: [kata, kata-fc]\n"
    )
    assert conf_mod.find_plugin(out)["arguments"] == args


def test_switching_between_extender_and_plugin_keeps_every_other_byte() -> None:
    conf = _fixture_conf("v1.12.4")
    extender = conf_mod.set_extender(conf, _args("v1.10"), PREFIX)
    plugin = conf_mod.remove_extender(conf_mod.set_plugin(extender, PLUGIN_ARGS), PREFIX)
    assert plugin == conf + PLUGIN_LINES
    back = conf_mod.remove_plugin(conf_mod.set_extender(plugin, _args("v1.10"), PREFIX))
    assert back == extender


def test_plugin_entry_in_the_wrong_tier_moves_and_a_foreign_extender_stays() -> None:
    conf = (
        "tiers:\n- plugins:\n  - name: gang\n  - name: mco-plugin\n    arguments: {crName: old}\n"
        "- plugins:\n  - name: predicates\n  - name: extender\n    arguments:\n      extender.urlPrefix: http://other:8888\n"
    )
    out = conf_mod.set_plugin(conf, PLUGIN_ARGS)
    assert _plugins(out, 0) == [{"name": "gang"}]
    assert [p["name"] for p in _plugins(out, 1)] == ["predicates", "extender", "mco-plugin"]
    assert conf_mod.remove_extender(out, PREFIX) is out  # not ours: kept


@pytest.mark.parametrize(
    ("conf", "args", "message"),
    [
        ("tiers:\n- plugins:\n  - name: mco-plugin\n  - name: mco-plugin\n", {}, "2 'mco-plugin' entries"),
        ("tiers:\n- plugins:\n  - name: predicates\n", ["crName"], "must be a mapping"),
        ("tiers: {}\n", {}, "no 'tiers' list"),
    ],
)
def test_bad_conf_or_arguments_for_the_plugin_give_a_clear_error(conf: str, args: Any, message: str) -> None:
    with pytest.raises(conf_mod.VolcanoConfError, match=message):
        conf_mod.set_plugin(conf, args)


def test_plugin_in_flow_style_plugins_falls_back_to_a_full_dump() -> None:
    conf = "tiers:\n- plugins: [{name: a}]\n- plugins: [{name: predicates}, {name: mco-plugin}]\n"
    out = conf_mod.set_plugin(conf, PLUGIN_ARGS)
    assert _plugins(out, 1) == [{"name": "predicates"}, {"name": "mco-plugin", "arguments": PLUGIN_ARGS}]
    assert _plugins(conf_mod.remove_plugin(out), 1) == [{"name": "predicates"}]


def test_the_role_filters_are_registered() -> None:
    filters = conf_mod.FilterModule().filters()
    assert filters["volcano_plugin_set"]("tiers:\n- plugins:\n  - name: predicates\n", {}).endswith("mco-plugin\n")
    with pytest.raises(conf_mod.AnsibleFilterError, match="2 'mco-plugin' entries"):
        filters["volcano_plugin_find"]("tiers:\n- plugins:\n  - name: mco-plugin\n  - name: mco-plugin\n")


@settings(max_examples=60, deadline=None)
@given(
    tiers=st.lists(st.lists(names, min_size=1, max_size=5), min_size=1, max_size=3),
    indent=st.sampled_from(["  ", "    "]),
    ttl=st.integers(min_value=1, max_value=600),
)
def test_generated_confs_take_the_plugin_and_give_it_back(tiers: list[list[str]], indent: str, ttl: int) -> None:
    conf = "tiers:\n" + "".join(
        "- plugins:\n" + "".join(f"{indent}- name: {n}\n" for n in tier) + "  # tier end\n" for tier in tiers
    )
    args = {**PLUGIN_ARGS, "crStatusTTLSeconds": ttl}
    out = conf_mod.set_plugin(conf, args)
    found = conf_mod.find_plugin(out)
    assert found["arguments"] == args
    assert found["tier"] == conf_mod.find_plugin(conf)["target_tier"]
    assert conf_mod.set_plugin(out, args) is out
    assert conf_mod.remove_plugin(out) == conf
