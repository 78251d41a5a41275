"""defaults/main.yml, meta/argument_specs.yml and docs/roles/<role>.md agree for the platform roles."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.roles.helpers import REPO

ROLES = ["kvm_check", "kata_runtime", "volcano", "mco_kube_scheduler"]
ALL_ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "meta" / "main.yml").is_file())


def _load(role: str) -> tuple[dict[str, Any], dict[str, Any]]:
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return defaults, specs["argument_specs"]["main"]["options"]


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_argument_specs_agree(role: str) -> None:
    defaults, options = _load(role)
    assert set(defaults) == set(options)
    for name, spec in options.items():
        assert name.startswith(role + "_"), name
        assert spec.get("description"), f"{name} has no description"
        assert spec.get("default") == defaults[name], (
            f"{name}: spec default {spec.get('default')!r} != {defaults[name]!r}"
        )


@pytest.mark.parametrize("role", ROLES)
def test_every_variable_is_documented(role: str) -> None:
    defaults, _ = _load(role)
    doc = (REPO / "docs" / "roles" / f"{role}.md").read_text()
    missing = [name for name in defaults if f"`{name}`" not in doc]
    assert missing == []


@pytest.mark.parametrize("role", ALL_ROLES)
def test_every_role_carries_the_project_license(role: str) -> None:
    meta = yaml.safe_load((REPO / "roles" / role / "meta" / "main.yml").read_text())
    assert meta["galaxy_info"]["license"] == "MulanPSL-2.0"


@pytest.mark.parametrize("plugin", sorted((REPO / "plugins").glob("*/*.py")), ids=lambda p: p.name)
def test_every_plugin_carries_the_project_license(plugin: Path) -> None:
    head = plugin.read_text().splitlines()[:5]
    assert "# Mulan PSL v2 (see LICENSE)" in head, f"{plugin.relative_to(REPO)}: license line missing or wrong"


def _commands(node: Any) -> Iterator[list[str]]:
    """Every ``argv`` of a command task anywhere under ``node`` (blocks included)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("ansible.builtin.command", "command") and isinstance(value, dict) and "argv" in value:
                yield [str(a) for a in value["argv"]]
            else:
                yield from _commands(value)
    elif isinstance(node, list):
        for item in node:
            yield from _commands(item)


def test_one_task_file_imports_images_into_containerd() -> None:
    """The roles that bring an image to the nodes (volcano, mco_kube_scheduler) include
    roles/mco_common/tasks/image_import.yml rather than run `ctr images import` themselves."""
    importing = sorted(
        str(path.relative_to(REPO))
        for path in REPO.glob("roles/*/tasks/*.yml")
        for argv in _commands(yaml.safe_load(path.read_text()))
        if "images" in argv and "import" in argv
    )
    assert importing == ["roles/mco_common/tasks/image_import.yml"]
    for role in ("volcano", "mco_kube_scheduler"):
        text = "".join(p.read_text() for p in (REPO / "roles" / role / "tasks").glob("*.yml"))
        assert "tasks_from: image_import" in text, role
