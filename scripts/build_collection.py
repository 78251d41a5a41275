"""Build the Ansible collection manycore.mco as a tarball an operator installs with ansible-galaxy.

Usage: build_collection.py [--output DIR] [--version X.Y.Z]   (default dist/; `make collection`)

The repository is the collection's source (galaxy.yml, roles/, plugins/,
playbooks/, meta/). The tarball also carries what the roles deploy, so an
installed collection needs no checkout: under files/wheelhouse/ the mco_py wheel
and the pinned locks of its dependencies (requirements/node.txt for every host,
requirements/control.txt for the analyzer and the extender), from which the
mco_common role assembles each host architecture's wheelhouse on the controller
(build_wheelhouse.py); and the CRD and the default detection rules under
mco_py/data/, where the roles look for them in a checkout too. Platform wheels
are not in the tarball: two architectures' would not fit Galaxy's 20 MB.

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
#: What the mco_py wheel is built from, for a build at another version.
WHEEL_SOURCE = ("pyproject.toml", "README.md", "LICENSE", "requirements", "mco_py", "bpf")
#: The runtime locks build_wheelhouse.py reads (control.txt includes node.txt).
LOCKS = ("requirements/node.txt", "requirements/control.txt")
#: Galaxy refuses larger collection tarballs.
GALAXY_MAX_BYTES = 20 * 1024 * 1024
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


def stage(into: Path, wheel: Path, version: str | None = None) -> None:
    """Lay the collection out in ``into`` (an empty directory), with the mco_py ``wheel``."""
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    galaxy.pop("build_ignore", None)  # the staged tree holds only what ships
    if version:
        galaxy["version"] = version
    (into / "galaxy.yml").write_text(yaml.safe_dump(galaxy, sort_keys=False))
    copy_from_root((*CONTENT, *EXAMPLES, *DATA), into)
    wheelhouse = into / "files" / "wheelhouse"
    copy_from_root(LOCKS, wheelhouse)
    shutil.copy2(wheel, wheelhouse / wheel.name)


def build_wheel(source: Path, into: Path) -> Path:
    """The mco_py wheel of ``source`` (with the CO-RE BPF object when `make -C bpf` can build it)."""
    if (source / "bpf" / "Makefile").is_file() and shutil.which("clang"):
        # Best effort: without clang/BTF the collector falls back to tracefs.
        subprocess.run(["make", "-s", "-C", str(source / "bpf")], check=False)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(into), str(source)], check=True)
    (wheel,) = into.glob("mco_py-*.whl")
    return wheel


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
    args.output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mco-collection-") as tmp:
        source = ROOT
        if args.version:
            source = versioned_source(Path(tmp) / "source", args.version)
        (Path(tmp) / "wheel").mkdir()
        wheel = build_wheel(source, Path(tmp) / "wheel")
        staged = Path(tmp) / "manycore-mco"
        staged.mkdir()
        stage(staged, wheel, args.version)
        galaxy = Path(sys.executable).parent / "ansible-galaxy"
        built = subprocess.run(
            [str(galaxy), "collection", "build", str(staged), "--output-path", str(args.output.resolve()), "--force"],
            check=True,
            capture_output=True,
            text=True,
        )
        print(built.stdout.strip())
    version = args.version or yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    tarball = args.output / f"manycore-mco-{version}.tar.gz"
    size = tarball.stat().st_size
    if size > GALAXY_MAX_BYTES:
        print(f"build_collection: {tarball} is {size} bytes, over Galaxy's {GALAXY_MAX_BYTES}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
