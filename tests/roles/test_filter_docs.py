"""Every filter and module of the collection has documentation ansible-doc shows; a filter's names its parameters."""

from __future__ import annotations

import ast
import json

import pytest

from tests.roles.helpers import BIN, REPO, run

FILTERS = REPO / "plugins" / "filter"


def filters() -> dict[str, list[str]]:
    """Each filter name the plugins register (their ``filters()`` dicts) -> the parameters after the input."""
    found: dict[str, list[str]] = {}
    for source in sorted(FILTERS.glob("*.py")):
        tree = ast.parse(source.read_text())
        functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.FunctionDef) and node.name == "filters"):
                continue
            (returned,) = [n.value for n in ast.walk(node) if isinstance(n, ast.Return)]
            assert isinstance(returned, ast.Dict)
            for key, value in zip(returned.keys, returned.values, strict=True):
                assert isinstance(key, ast.Constant)
                target = value.args[0] if isinstance(value, ast.Call) else value  # _wrap(func) or func
                assert isinstance(target, ast.Name)
                found[key.value] = [a.arg for a in functions[target.id].args.args[1:]]
    return found


FILTER_NAMES = sorted(filters())


def test_the_plugins_register_the_filters_the_roles_use() -> None:
    used = {"grantable_caps", "volcano_manifest", "volcano_scheduler_info", "containerd_with_block"}
    assert used <= set(FILTER_NAMES)
    assert len(FILTER_NAMES) == 15


@pytest.fixture(scope="module")
def docs() -> dict[str, dict[str, object]]:
    names = [f"manycore.mco.{name}" for name in FILTER_NAMES]
    proc = run([str(BIN / "ansible-doc"), "-t", "filter", "--json", *names])
    assert proc.returncode == 0, proc.stderr
    assert "[WARNING]" not in proc.stderr, proc.stderr
    loaded: dict[str, dict[str, object]] = json.loads(proc.stdout)
    return loaded


@pytest.mark.parametrize("name", FILTER_NAMES)
def test_ansible_doc_shows_the_filter(name: str, docs: dict[str, dict[str, object]]) -> None:
    doc = docs[f"manycore.mco.{name}"]
    documentation = doc["doc"]
    assert isinstance(documentation, dict)
    assert documentation["name"] == name
    assert documentation["short_description"]
    assert f"manycore.mco.{name}" in str(doc["examples"])
    assert "_value" in doc["return"]  # type: ignore[operator]
    options = documentation["options"]
    assert "_input" in options
    # the documented parameters are the function's, in the order a call passes them
    parameters = filters()[name]
    assert sorted(set(options) - {"_input"}) == sorted(parameters)
    if parameters:
        assert [p.strip() for p in str(documentation["positional"]).split(",")] == parameters


def test_ansible_doc_lists_every_filter_of_the_collection() -> None:
    proc = run([str(BIN / "ansible-doc"), "-t", "filter", "--list", "manycore.mco", "--json"])
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    assert sorted(listed) == [f"manycore.mco.{name}" for name in FILTER_NAMES]
    assert all(listed.values())  # a short description each


def test_each_doc_file_documents_a_filter() -> None:
    assert sorted(p.stem for p in FILTERS.glob("*.yml")) == FILTER_NAMES


MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py"))


@pytest.mark.parametrize("name", MODULES)
def test_ansible_doc_shows_each_module(name: str) -> None:
    proc = run([str(BIN / "ansible-doc"), "-t", "module", "--json", f"manycore.mco.{name}"])
    assert proc.returncode == 0, proc.stderr
    assert "[WARNING]" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)[f"manycore.mco.{name}"]["doc"]
    assert doc["module"] == name
    assert doc["short_description"]
