"""Build the Ansible collection manycore.mco as a tarball an operator installs with ansible-galaxy.

Usage: build_collection.py [--output DIR] [--version X.Y.Z]   (default dist/; `make collection`)

The repository is the collection's source (galaxy.yml, roles/, plugins/,
playbooks/, meta/). The tarball also carries what the roles deploy, so an
installed collection needs no checkout: the mco_py wheelhouse (wheels of mco_py
and its pinned runtime dependencies, built by the mco_common role's
build_wheelhouse.py into .run/wheelhouse and reused while the source is
unchanged) under files/wheelhouse/, and the CRD and the default detection rules
under mco_py/data/, where the roles look for them in a checkout too.

--version builds the same source as another version, as a release would after
bumping it: galaxy.yml's version and mco_py.__version__ (so the wheel the hosts
get) are both set, in a staged copy; the checkout is not touched.
"""

from __future__ import annotations

import argparse
import re
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
#: What the mco_py wheel is built from (build_wheelhouse.py), for a build at another version.
WHEEL_SOURCE = ("pyproject.toml", "README.md", "LICENSE", "requirements", "mco_py", "bpf")
VERSION = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")


def copy_from_root(names: tuple[str, ...], into: Path, *ignored: str) -> None:
    """Copy these files and trees of the repository into ``into``, at the same relative paths."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", *ignored)
    for name in names:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=ignore)
        elif source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)


def stage(into: Path, wheelhouse: Path, version: str | None = None) -> None:
    """Lay the collection out in ``into`` (an empty directory)."""
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    galaxy.pop("build_ignore", None)  # the staged tree holds only what ships
    if version:
        galaxy["version"] = version
    (into / "galaxy.yml").write_text(yaml.safe_dump(galaxy, sort_keys=False))
    copy_from_root((*CONTENT, *EXAMPLES, *DATA), into)
    (into / "files" / "wheelhouse").mkdir(parents=True)
    shutil.copy2(wheelhouse / "wheelhouse.tar", into / "files" / "wheelhouse" / "wheelhouse.tar")


def versioned_source(into: Path, version: str) -> Path:
    """A copy of the wheel's source in ``into`` with ``mco_py.__version__`` set to ``version``."""
    into.mkdir(parents=True)
    copy_from_root(WHEEL_SOURCE, into, "*.egg-info", "build")
    init = into / "mco_py" / "__init__.py"
    text, count = re.subn(r'(?m)^__version__ = "[^"]*"$', f'__version__ = "{version}"', init.read_text())
    if count != 1:
        raise SystemExit(f"build_collection: no __version__ line in {init.relative_to(into)} to set")
    init.write_text(text)
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=ROOT / "dist", help="where the tarball goes (default dist/)")
    parser.add_argument("--version", help="build as this version X.Y.Z (default: galaxy.yml's)")
    args = parser.parse_args()
    if args.version is not None and not VERSION.match(args.version):
        parser.error(f"--version must be X.Y.Z (numbers, as galaxy.yml and wheels accept), got {args.version!r}")
    builder = ROOT / "roles" / "mco_common" / "files" / "build_wheelhouse.py"
    args.output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mco-collection-") as tmp:
        source, wheelhouse = ROOT, ROOT / ".run" / "wheelhouse"
        if args.version:
            source = versioned_source(Path(tmp) / "source", args.version)
            wheelhouse = Path(tmp) / "wheelhouse"
        subprocess.run([sys.executable, str(builder), str(source), str(wheelhouse)], check=True)
        staged = Path(tmp) / "manycore-mco"
        staged.mkdir()
        stage(staged, wheelhouse, args.version)
        galaxy = Path(sys.executable).parent / "ansible-galaxy"
        subprocess.run(
            [str(galaxy), "collection", "build", str(staged), "--output-path", str(args.output.resolve()), "--force"],
            check=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
