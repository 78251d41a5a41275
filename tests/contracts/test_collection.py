"""The collection manycore.mco: built from the repository, installed with ansible-galaxy, run without a checkout."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet

import mco_py
from tests.contracts.checkout import checkout_copy
from tests.docs.doc_commands import select

# The `release` tier (lane 2 of make test), not the pytest tier: docs/development.md, "Test tiers".
pytestmark = pytest.mark.release

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_the_collection_and_mco_py_have_one_version() -> None:
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    assert (galaxy["namespace"], galaxy["name"], galaxy["version"]) == ("manycore", "mco", mco_py.__version__)
    assert f"\n## [{mco_py.__version__}] - " in (ROOT / "CHANGELOG.md").read_text()


@pytest.mark.parametrize("later", ["2.20.0", "2.21.4", "2.22.0", "3.0.0"])
def test_requires_ansible_takes_the_tested_ansible_core_and_later_ones(later: str) -> None:
    wanted = SpecifierSet(yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"])
    tested = dict(pin.split("==") for pin in (ROOT / "requirements" / "build.txt").read_text().split() if "==" in pin)
    assert wanted.contains(tested["ansible-core"])
    assert wanted.contains(metadata.version("ansible-core"))
    assert wanted.contains(later)


def test_requirements_yml_asks_for_what_galaxy_yml_depends_on() -> None:
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    wanted = {c["name"]: c["version"] for c in yaml.safe_load((ROOT / "requirements.yml").read_text())["collections"]}
    assert wanted == galaxy["dependencies"]


#: Galaxy refuses collection tarballs larger than this.
GALAXY_MAX_BYTES = 20 * 1024 * 1024
#: Stand-ins for Debian's package tools: they log each call and fail, so a build that reaches for
#: them (as the full `make setup` does as root) is seen.
FAKE_TOOL = '#!/bin/sh\necho "$(basename "$0") $*" >> "$MCO_FAKE_LOG"\nexit 1\n'


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """What the user guide says to run, in a fresh copy of the checkout (no .venv): `make collection`
    writes dist/manycore-mco-<version>.tar.gz. Returns the copy and the log of Debian tool calls."""
    (make,) = select(ROOT / "docs" / "user-guide.md", "Install on a cluster", r"^make collection$")
    copy = checkout_copy(tmp_path_factory.mktemp("checkout"))
    fake = tmp_path_factory.mktemp("fake-bin")
    for tool in ("apt-get", "dpkg-query", "apt"):
        (fake / tool).write_text(FAKE_TOOL)
        (fake / tool).chmod(0o755)
    log = fake / "calls.log"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("VIRTUAL_ENV", "ANSIBLE_"))}
    env |= {"PATH": f"{fake}:{os.environ['PATH'].replace(str(BIN) + ':', '')}", "MCO_FAKE_LOG": str(log)}
    subprocess.run(["bash", "-c", make], cwd=copy, env=env, check=True, timeout=900)
    return copy, log


@pytest.fixture(scope="module")
def tarball(build: tuple[Path, Path]) -> Path:
    built = build[0] / "dist" / f"manycore-mco-{mco_py.__version__}.tar.gz"
    assert built.is_file()
    return built


def test_make_collection_installs_no_test_tools_and_no_debian_packages(build: tuple[Path, Path]) -> None:
    copy, log = build
    assert not log.exists(), log.read_text()
    venv = copy / ".venv" / "bin"
    assert (venv / "ansible-galaxy").is_file()
    assert not [tool for tool in ("pytest", "molecule", "ansible-lint", "mypy", "ruff") if (venv / tool).exists()]


def test_the_tarball_fits_galaxy(tarball: Path) -> None:
    assert tarball.stat().st_size < GALAXY_MAX_BYTES


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
        f"files/wheelhouse/mco_py-{mco_py.__version__}-py3-none-any.whl",
        "files/wheelhouse/requirements/node.txt",
        "files/wheelhouse/requirements/control.txt",
        "mco_py/data/rules.yaml",
        "mco_py/data/crds/nodeinterferencereports.yaml",
        "mco_py/data/crds/nodeinterferencereportshards.yaml",
        "plugins/modules/kvm_probe.py",
        "plugins/filter/volcano_conf.py",
        "plugins/filter/volcano_extender_set.yml",  # ansible-doc's documentation of each filter
        "meta/runtime.yml",
        "playbooks/site.yml",
        "roles/mco_collector/README.md",
        "inventory/example-existing/group_vars/all.yml",
        "CHANGELOG.md",
        "LICENSE",
    } <= names
    assert not [n for n in names if n.startswith(("tests/", "molecule/", "bench/", ".")) or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith("mco_py/") and n.endswith(".py")]
    # platform wheels are fetched for each host architecture on the controller, not shipped
    wheels = [n for n in names if n.endswith(".whl")]
    assert wheels == [f"files/wheelhouse/mco_py-{mco_py.__version__}-py3-none-any.whl"]


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
    collection = installed / "ansible_collections" / "manycore" / "mco"
    assert (collection / "MANIFEST.json").is_file()
    # The wheelhouse as the user guide builds it for an offline controller, on this (connected) machine ...
    (build_wheelhouse,) = select(
        ROOT / "docs" / "user-guide.md",
        "Install on a cluster",
        r"build_wheelhouse[.]py",
        {"<collection>": str(collection), "DIR": str(tmp_path / "wheelhouse")},
    )
    subprocess.run(["bash", "-c", build_wheelhouse], cwd=tmp_path, check=True, timeout=600)
    # ... and used by a controller whose pip reaches no index
    env |= {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": "", "PIP_RETRIES": "0"}
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
            "-e",
            f"mco_common_wheelhouse_controller={tmp_path / 'wheelhouse'}",
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
    # the wheelhouse is this architecture's, built from the collection's mco_py wheel (no source tree)
    # (the user guide's wheelhouse used as it is: a build would have needed the unreachable index)
    build = run.stdout.split("Build the wheelhouses on the controller]", 1)[1].split("TASK [", 1)[0]
    assert "ok: [localhost]" in build
    (wheel,) = (collection / "files" / "wheelhouse").glob("mco_py-*.whl")
    with tarfile.open(tmp_path / "wheelhouse" / platform.machine() / "control.tar") as tar:
        shipped = tar.extractfile(wheel.name)
        assert shipped is not None
        assert shipped.read() == wheel.read_bytes()
