"""The collection manycore.mco: built from the repository, installed with ansible-galaxy, run without a checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

import mco_py
from tests.docs.doc_commands import select

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_the_collection_and_mco_py_have_one_version() -> None:
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    assert (galaxy["namespace"], galaxy["name"], galaxy["version"]) == ("manycore", "mco", mco_py.__version__)
    assert f"## {mco_py.__version__}" in (ROOT / "CHANGELOG.md").read_text()


def test_requirements_yml_asks_for_what_galaxy_yml_depends_on() -> None:
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    wanted = {c["name"]: c["version"] for c in yaml.safe_load((ROOT / "requirements.yml").read_text())["collections"]}
    assert wanted == galaxy["dependencies"]


@pytest.fixture(scope="module")
def tarball() -> Path:
    """What the user guide says to run: `make collection` writes dist/manycore-mco-<version>.tar.gz."""
    (make,) = select(ROOT / "docs" / "user-guide.md", "Install on a cluster", r"^make collection$")
    built = ROOT / "dist" / f"manycore-mco-{mco_py.__version__}.tar.gz"
    built.unlink(missing_ok=True)
    subprocess.run(["bash", "-c", make], cwd=ROOT, check=True, timeout=600)
    assert built.is_file()
    return built


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "1.0.0-rc.1", "01.0.0"])
def test_a_build_at_another_version_takes_only_x_y_z(version: str) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_collection.py"), "--version", version],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert "--version must be X.Y.Z" in out.stderr


def test_the_tarball_holds_what_the_roles_deploy_and_no_development_files(tarball: Path) -> None:
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
    assert {
        "files/wheelhouse/wheelhouse.tar",
        "mco_py/data/rules.yaml",
        "mco_py/data/crds/nodeinterferencereports.yaml",
        "mco_py/data/crds/nodeinterferencereportshards.yaml",
        "plugins/modules/kvm_probe.py",
        "plugins/filter/volcano_conf.py",
        "playbooks/site.yml",
        "roles/mco_collector/README.md",
        "inventory/example-existing/group_vars/all.yml",
        "CHANGELOG.md",
        "LICENSE",
    } <= names
    assert not [n for n in names if n.startswith(("tests/", "molecule/", "bench/", ".")) or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith("mco_py/") and n.endswith(".py")]


# A full site.yml run from the installed collection: about 65 s on an idle 2-core machine,
# twice that beside make test's second lane (pytest-timeout's default is 120 s).
@pytest.mark.timeout(600)
def test_an_installed_collection_runs_the_site_playbook_without_a_checkout(tarball: Path, tmp_path: Path) -> None:
    installed, deps = tmp_path / "installed", tmp_path / "deps" / "ansible_collections"
    deps.mkdir(parents=True)  # its dependencies, from the checkout's pinned set (no Galaxy here)
    for namespace in ("kubernetes", "community", "ansible"):
        (deps / namespace).symlink_to(ROOT / "collections" / "ansible_collections" / namespace)
    shutil.copy(ROOT / "inventory" / "local.yml", tmp_path / "hosts.yml")
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")} | {
        "ANSIBLE_COLLECTIONS_PATH": f"{installed}:{deps.parent}",
        "ANSIBLE_NOCOLOR": "1",
    }
    subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "install", str(tarball), "-p", str(installed), "--no-deps"],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
    )
    assert (installed / "ansible_collections" / "manycore" / "mco" / "MANIFEST.json").is_file()
    run = subprocess.run(
        # --check as on a new host: nothing of MCO's under the install directory yet
        [
            str(BIN / "ansible-playbook"),
            "-i",
            "hosts.yml",
            "manycore.mco.site",
            "--check",
            "-e",
            f"mco_common_install_dir={tmp_path / 'opt-mco'}",
            "-e",  # a new controller too: no CA, keys or certificates yet
            f"mco_pki_dir={tmp_path / 'pki'}",
        ],
        cwd=tmp_path,  # no ansible.cfg, no repository: only the installed collection
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-2000:]
    # check mode writes nothing: it says which certificates a real run would issue
    assert not (tmp_path / "pki").exists()
    assert "Would issue localhost's collector key and certificate" in run.stdout
    roles = str(installed / "ansible_collections" / "manycore" / "mco" / "roles")
    assert roles in run.stdout or "manycore.mco.mco_common" in run.stdout
    # the wheelhouse comes from the collection, not from a build of a source tree
    build = run.stdout.split("Build the wheelhouse on the controller", 1)[1].split("TASK [", 1)[0]
    assert "skipping: [localhost]" in build
