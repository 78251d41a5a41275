"""Build the Ansible collection manycore.mco as a tarball an operator installs with ansible-galaxy.

Usage: build_collection.py [--output DIR]   (default dist/; `make collection`)

The repository is the collection's source (galaxy.yml, roles/, plugins/,
playbooks/, meta/). The tarball also carries what the roles deploy, so an
installed collection needs no checkout: the mco_py wheelhouse (wheels of mco_py
and its pinned runtime dependencies, built by the mco_common role's
build_wheelhouse.py into .run/wheelhouse and reused while the source is
unchanged) under files/wheelhouse/, and the CRD and the default detection rules
under mco_py/data/, where the roles look for them in a checkout too.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
#: Directories and files of the repository that belong in the collection.
CONTENT = ("README.md", "LICENSE", "CHANGELOG.md", "requirements.yml", "meta", "roles", "plugins", "playbooks", "docs")
EXAMPLES = ("inventory/example", "inventory/example-existing")
DATA = ("mco_py/data/rules.yaml", "mco_py/data/crds")


def stage(into: Path, wheelhouse: Path) -> None:
    """Lay the collection out in ``into`` (an empty directory)."""
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    galaxy.pop("build_ignore", None)  # the staged tree holds only what ships
    (into / "galaxy.yml").write_text(yaml.safe_dump(galaxy, sort_keys=False))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in (*CONTENT, *EXAMPLES, *DATA):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=ignore)
        else:
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    (into / "files" / "wheelhouse").mkdir(parents=True)
    shutil.copy2(wheelhouse / "wheelhouse.tar", into / "files" / "wheelhouse" / "wheelhouse.tar")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=ROOT / "dist", help="where the tarball goes (default dist/)")
    args = parser.parse_args()
    wheelhouse = ROOT / ".run" / "wheelhouse"
    builder = ROOT / "roles" / "mco_common" / "files" / "build_wheelhouse.py"
    subprocess.run([sys.executable, str(builder), str(ROOT), str(wheelhouse)], check=True)
    args.output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mco-collection-") as tmp:
        staged = Path(tmp) / "manycore-mco"
        staged.mkdir()
        stage(staged, wheelhouse)
        galaxy = Path(sys.executable).parent / "ansible-galaxy"
        subprocess.run(
            [str(galaxy), "collection", "build", str(staged), "--output-path", str(args.output.resolve()), "--force"],
            check=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
