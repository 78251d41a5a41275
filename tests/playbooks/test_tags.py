"""Tags are plain words, and every tag the docs tell an operator to use exists."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORD = re.compile(r"^[a-z][a-z0-9_]*$")


def listed_tags() -> set[str]:
    run = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "inventory/local.yml", "playbooks/site.yml",
         "--list-tags"],
        cwd=ROOT, env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")},
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return {
        tag.strip() for line in re.findall(r"TAGS: \[(.*?)\]", run.stdout) for tag in line.split(",") if tag.strip()
    }


def role_tags() -> set[str]:
    """Tags of the roles' steps, including those of roles the playbooks include dynamically (mco_crds)."""
    tags: set[str] = set()
    for main in ROOT.glob("roles/*/tasks/main.yml"):
        for task in yaml.safe_load(main.read_text()) or []:
            tags.update(task.get("tags", []))
    return tags


def documented_tags() -> set[str]:
    docs = [*ROOT.glob("*.md"), *ROOT.glob("docs/**/*.md")]
    found = {
        t for doc in docs for group in re.findall(r"--tags[ =]([\w,]+)", doc.read_text()) for t in group.split(",")
    }
    return found


def test_list_tags_shows_only_words() -> None:
    tags = listed_tags()
    assert {"mco_collector", "mco_collector_configure", "configure", "install", "run", "always"} <= tags
    assert [t for t in tags if not WORD.match(t)] == []


def test_every_documented_tag_exists() -> None:
    documented = documented_tags()
    assert {"mco_collector", "configure"} <= documented  # the runbook's examples
    assert documented - (listed_tags() | role_tags()) == set()


def test_every_role_checks_first_on_each_of_its_tags() -> None:
    """node_exporter style: the first task of each role carries all of the role's step tags."""
    for main in ROOT.glob("roles/*/tasks/main.yml"):
        tasks = yaml.safe_load(main.read_text()) or []
        if not tasks:
            continue
        steps = set().union(*(t.get("tags", []) for t in tasks[1:])) if len(tasks) > 1 else set()
        first = set(tasks[0].get("tags", []))
        assert "always" in first or steps <= first, f"{main.relative_to(ROOT)}: {sorted(steps - first)}"


def test_the_scheduler_plays_run_under_another_roles_tag() -> None:
    """`site.yml --tags mco_collector` passes the scheduler plays: their roles' argument checks (tagged
    always) read mco-plugin's arguments, which the plays' pre_tasks compute on every tag."""
    for playbook in ("playbooks/volcano.yml", "playbooks/kube_scheduler.yml"):
        run = subprocess.run(
            [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "inventory/local.yml", playbook,
             "--tags", "mco_collector", "-e", '{"mco_mode": "cluster", "mco_kubeconfig": "/nonexistent"}'],
            cwd=ROOT, env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")},
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert run.returncode == 0, playbook + "\n" + run.stdout[-3000:] + run.stderr[-2000:]
