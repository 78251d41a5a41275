"""Releases: scripts/release.py in a copy of the checkout (never this repository's tags), and the
runbooks' upgrade and rollback between two released collection tarballs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.contracts.checkout import checkout_copy
from tests.docs.doc_commands import select

# The `release` tier (lane 2 of make test), not the pytest tier: docs/development.md, "Test tiers".
pytestmark = pytest.mark.release

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RUNBOOKS = ROOT / "docs" / "runbooks.md"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "MCO test",
    "GIT_AUTHOR_EMAIL": "test@mco.invalid",
    "GIT_COMMITTER_NAME": "MCO test",
    "GIT_COMMITTER_EMAIL": "test@mco.invalid",
}


def git(repo: Path, *argv: str) -> str:
    env = os.environ | GIT_ENV
    return subprocess.run(["git", *argv], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout


def release(repo: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | GIT_ENV
    return subprocess.run(
        [sys.executable, str(repo / "scripts" / "release.py"), *argv],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository of the checkout as it is now, with 0.1.0 and 0.2.0 released from it."""
    repo = checkout_copy(tmp_path_factory.mktemp("repo"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "MCO as it is")
    tagged = release(repo, "tag", "0.1.0")
    assert tagged.returncode == 0, tagged.stderr
    assert tagged.stdout == "tagged v0.1.0\n"
    prepared = release(repo, "prepare", "0.2.0", "--date", "2026-12-06")
    assert prepared.returncode == 0, prepared.stderr
    git(repo, "commit", "-q", "-am", "release 0.2.0")
    tagged = release(repo, "tag", "0.2.0")
    assert tagged.returncode == 0, tagged.stderr
    return repo


def test_a_release_is_an_annotated_tag_with_its_changelog_section(repo: Path) -> None:
    assert git(repo, "tag", "--list").split() == ["v0.1.0", "v0.2.0"]
    assert git(repo, "cat-file", "-t", "v0.2.0").strip() == "tag"  # annotated, not a lightweight tag
    message = git(repo, "tag", "--list", "--format=%(contents)", "v0.2.0")
    assert message.startswith("MCO 0.2.0 (2026-12-06)\n\n### Changed (check your inventory)")
    assert "Collector-only hosts get no Kubernetes client" in message
    assert "## [0.1.0]" not in message
    first = git(repo, "tag", "--list", "--format=%(contents)", "v0.1.0")
    assert first.startswith("MCO 0.1.0 (2026-12-01)\n\nThe first version")


def test_prepare_dates_the_unreleased_section_and_sets_every_version(repo: Path) -> None:
    changelog = git(repo, "show", "v0.2.0:CHANGELOG.md")
    assert "## Unreleased\n\n## [0.2.0] - 2026-12-06\n\n### Changed" in changelog
    assert "version: 0.2.0" in git(repo, "show", "v0.2.0:galaxy.yml")
    assert '__version__ = "0.2.0"' in git(repo, "show", "v0.2.0:mco_py/__init__.py")
    empty = release(repo, "prepare", "0.3.0")
    assert empty.returncode == 1
    assert "'## Unreleased' section is empty: nothing to release" in empty.stderr


def test_a_tag_is_refused_naming_each_problem_and_its_fix(repo: Path) -> None:
    again = release(repo, "tag", "0.2.0")
    assert again.returncode == 1
    assert "the tag v0.2.0 exists already" in again.stderr
    older = release(repo, "tag", "0.1.0")
    assert "galaxy.yml's version is 0.2.0: set it to 0.1.0" in older.stderr
    assert "v0.2.0 is tagged already: a release must be newer than every tagged one" in older.stderr
    unprepared = release(repo, "tag", "0.3.0")
    assert unprepared.returncode == 1
    assert unprepared.stderr.splitlines()[1:] == [
        "- galaxy.yml's version is 0.2.0: set it to 0.3.0 (release.py prepare 0.3.0)",
        "- mco_py/__init__.py's __version__ is 0.2.0: set it to 0.3.0",
        "- CHANGELOG.md has no '## [0.3.0] - YYYY-MM-DD' section (release.py prepare 0.3.0)",
    ]
    (repo / "galaxy.yml").write_text((repo / "galaxy.yml").read_text() + "# local edit\n")
    try:
        dirty = release(repo, "tag", "0.3.0")
        assert "- the working tree has uncommitted changes: commit them" in dirty.stderr
    finally:
        git(repo, "checkout", "galaxy.yml")
    assert git(repo, "tag", "--list").split() == ["v0.1.0", "v0.2.0"]
    bad = release(repo, "tag", "1.0")
    assert bad.returncode == 2
    assert "the version must be X.Y.Z" in bad.stderr


@pytest.fixture(scope="module")
def tarballs(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each release's collection, built from its tag as the rollback runbook says."""
    out = tmp_path_factory.mktemp("releases")
    for version in ("0.1.0", "0.2.0"):
        git(repo, "checkout", "-q", f"v{version}")
        subprocess.run(
            [sys.executable, str(repo / "scripts" / "build_collection.py"), "--output", str(out)],
            cwd=repo,
            check=True,
            capture_output=True,
            timeout=600,
        )
    git(repo, "checkout", "-q", "main")
    return {version: out / f"manycore-mco-{version}.tar.gz" for version in ("0.1.0", "0.2.0")}


def wheel_in(wheelhouse: Path) -> list[str]:
    with tarfile.open(wheelhouse / "control.tar") as tar:
        return [name for name in tar.getnames() if name.startswith("mco_py-")]


# Three site runs and one of manycore.mco.mco, in check mode, with two wheelhouse builds.
@pytest.mark.timeout(900)
def test_upgrade_then_rollback_between_releases_as_the_runbooks_say(tarballs: dict[str, Path], tmp_path: Path) -> None:
    installed, deps = tmp_path / "installed", tmp_path / "deps" / "ansible_collections"
    deps.mkdir(parents=True)  # the collection's dependencies, from the checkout's pinned set
    for namespace in ("kubernetes", "community", "ansible"):
        (deps / namespace).symlink_to(ROOT / "collections" / "ansible_collections" / namespace)
    shutil.copy(ROOT / "inventory" / "local.yml", tmp_path / "hosts.yml")
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")} | {
        # ansible-galaxy installs into the first directory, where ansible-playbook finds it first
        "ANSIBLE_COLLECTIONS_PATH": f"{installed}:{deps.parent}",
        "ANSIBLE_NOCOLOR": "1",
        "PATH": f"{BIN}:{os.environ['PATH']}",
    }
    places = {
        "manycore-mco-0.1.0.tar.gz": str(tarballs["0.1.0"]),
        "manycore-mco-0.2.0.tar.gz": str(tarballs["0.2.0"]),
        "$INV": "hosts.yml",
    }
    wheelhouse = tmp_path / "wheelhouse"
    # check mode on this host: a new host and controller, as far as MCO's files go
    check = (
        f" --check -e mco_common_install_dir={tmp_path / 'opt-mco'} -e mco_pki_dir={tmp_path / 'pki'}"
        f" -e mco_common_wheelhouse_controller={wheelhouse}"
    )

    def follow(section: str, version: str) -> None:
        for documented in select(RUNBOOKS, section, r"^ansible", places):
            command = documented + (check if documented.startswith("ansible-playbook") else "")
            done = subprocess.run(
                ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
            )
            assert done.returncode == 0, f"{command}\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
        manifest = json.loads((installed / "ansible_collections" / "manycore" / "mco" / "MANIFEST.json").read_text())
        assert manifest["collection_info"]["version"] == version
        # the controller's wheelhouse carries that release's mco_py, and only it
        assert wheel_in(wheelhouse / os.uname().machine) == [f"mco_py-{version}-py3-none-any.whl"]

    follow("Rollback", "0.1.0")  # its install command: release 0.1.0 in place first
    follow("Upgrade", "0.2.0")
    follow("Rollback", "0.1.0")
