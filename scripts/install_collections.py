"""Unpack the pinned Ansible collections from the community `ansible` wheel.

Reads requirements/collections.txt, downloads the wheel with pip into a cache
outside the clone (reused across clones), checks its sha256, and extracts only
the listed collections into ./collections/ansible_collections. Writes a stamp
so a second run does nothing unless the list changes. Links this repository in as
the collection manycore.mco (collections/ansible_collections/manycore/mco -> ../../..),
so the playbooks run the roles and plugins of the checkout, not an installed copy.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path


def parse_spec(path: Path) -> tuple[str, str, list[str]]:
    wheel_req = ""
    digest = ""
    names: list[str] = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("wheel "):
            _, wheel_req, sha = line.split()
            digest = sha.removeprefix("sha256=")
        else:
            names.append(line)
    if not wheel_req or len(digest) != 64:
        sys.exit(f"{path}: first entry must be 'wheel ansible==X sha256=<64 hex>'")
    return wheel_req, digest, names


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def link_this_collection(dest: Path) -> None:
    """collections/ansible_collections/manycore/mco -> the repository (relative, so clones move freely)."""
    link = dest / "ansible_collections" / "manycore" / "mco"
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() and os.readlink(link) == "../../..":
        return
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.exists():
        shutil.rmtree(link)
    link.symlink_to("../../..", target_is_directory=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", type=Path, default=Path("requirements/collections.txt"))
    parser.add_argument("--dest", type=Path, default=Path("collections"))
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("MCO_CACHE", Path.home() / ".cache" / "mco")))
    args = parser.parse_args()

    wheel_req, digest, names = parse_spec(args.spec)
    stamp = args.dest / ".installed"
    wanted = f"{wheel_req} {digest} {' '.join(sorted(names))}\n"
    if stamp.exists() and stamp.read_text() == wanted:
        link_this_collection(args.dest)
        print(f"collections: up to date ({', '.join(names)})")
        return 0

    cache = args.cache / "wheels"
    cache.mkdir(parents=True, exist_ok=True)
    name, version = wheel_req.split("==")
    wheel = cache / f"{name}-{version}-py3-none-any.whl"
    if not wheel.exists() or sha256(wheel) != digest:
        print(f"collections: downloading {wheel_req} (about 54 MB)")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(cache), wheel_req],
            check=True,
        )
    actual = sha256(wheel)
    if actual != digest:
        wheel.unlink(missing_ok=True)
        sys.exit(f"collections: sha256 mismatch for {wheel.name}: expected {digest}, got {actual}")

    target = args.dest / "ansible_collections"
    if target.exists():
        shutil.rmtree(target)
    prefixes = [f"ansible_collections/{n.replace('.', '/')}/" for n in names]
    found: set[str] = set()
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            for prefix, n in zip(prefixes, names, strict=True):
                if member.startswith(prefix):
                    zf.extract(member, args.dest)
                    found.add(n)
    missing = sorted(set(names) - found)
    if missing:
        sys.exit(f"collections: not in {wheel.name}: {', '.join(missing)}")
    link_this_collection(args.dest)
    stamp.write_text(wanted)
    print(f"collections: installed {', '.join(names)} into {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
