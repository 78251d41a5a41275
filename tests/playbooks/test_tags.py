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


def listed_tags(playbook: str = "playbooks/site.yml") -> set[str]:
    """The tags ``ansible-playbook --list-tags`` shows for ``playbook``."""
    run = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "inventory/local.yml", playbook,
         "--list-tags"],
        cwd=ROOT, env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")},
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return {
        tag.strip() for line in re.findall(r"TAGS: \[(.*?)\]", run.stdout) for tag in line.split(",") if tag.strip()
    }


#: The playbook a command names (``playbooks/mco.yml``, ``site.yml``).
_PLAYBOOK = re.compile(r"(?<![\w/.-])((?:playbooks/)?[\w-]+\.yml)\b")


def documented_tags(docs: list[Path]) -> dict[tuple[str, str], str]:
    """Each ``--tags`` a document gives: (where, tag) -> the playbook the same line names
    (playbooks/site.yml when it names none: the playbook that runs every role)."""
    found: dict[tuple[str, str], str] = {}
    for doc in docs:
        for number, line in enumerate(doc.read_text().splitlines(), start=1):
            for match in re.finditer(r"--tags[ =]([\w,]+)", line):
                named = [p for p in _PLAYBOOK.findall(line[: match.start()]) if (ROOT / p).is_file()]
                playbook = named[-1] if named else "playbooks/site.yml"
                for tag in match.group(1).split(","):
                    found[(f"{doc.relative_to(ROOT) if doc.is_relative_to(ROOT) else doc}:{number}", tag)] = playbook
    return found


def table_tags() -> set[str]:
    """The tags docs/configuration.md's "Tags" table names as examples."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    section = text[text.index("\n## Tags\n") : text.index("\n## ", text.index("\n## Tags\n") + 1)]
    return {
        tag for row in re.findall(r"(?m)^\| `[^|]*\| [^|]*\((.*)\) \|$", section) for tag in re.findall(r"`(\w+)`", row)
    }


def test_list_tags_shows_only_words() -> None:
    tags = listed_tags()
    assert {"mco_collector", "mco_collector_configure", "configure", "install", "run", "always"} <= tags
    assert [t for t in tags if not WORD.match(t)] == []


def test_every_documented_tag_is_listed_by_its_playbook() -> None:
    docs = [*ROOT.glob("*.md"), *ROOT.glob("docs/**/*.md"), *ROOT.glob("roles/*/README.md")]
    documented = documented_tags(docs)
    assert ("docs/runbooks.md", "mco_crds_configure", "playbooks/mco.yml") in {
        (where.split(":")[0], tag, playbook) for (where, tag), playbook in documented.items()
    }  # the rules runbook's
    listed = {playbook: listed_tags(playbook) for playbook in set(documented.values())}
    missing = [f"{where}: --tags {tag} ({playbook} --list-tags does not show it)"
               for (where, tag), playbook in sorted(documented.items()) if tag not in listed[playbook]]  # fmt: skip
    assert missing == []


def test_every_tag_the_tags_table_names_is_listed() -> None:
    named = table_tags()
    assert {"mco_crds_configure", "mco_collector_configure", "kata_runtime_install"} <= named
    assert named - listed_tags() == set()


def test_a_tag_is_checked_against_the_playbook_its_line_names(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "Run `.venv/bin/ansible-playbook -i $INV playbooks/mco.yml --tags mco_crds_configure,configure`.\n"
        "Or `--tags mco_collector` (site.yml by default); `ansible-playbook site.yml --tags=run`.\n"
    )
    assert documented_tags([doc]) == {
        (f"{doc}:1", "mco_crds_configure"): "playbooks/mco.yml",
        (f"{doc}:1", "configure"): "playbooks/mco.yml",
        (f"{doc}:2", "mco_collector"): "playbooks/site.yml",
        (f"{doc}:2", "run"): "site.yml",
    }


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
