#!/usr/bin/env python3
"""Build the MCO wheelhouse (and wheelhouse.tar) on the Ansible controller (hosts need no registry).

Usage: build_wheelhouse.py REPO_ROOT WHEELHOUSE
Builds the mco_py wheel (with the CO-RE BPF object when `make -C bpf` can build
it) and collects the pinned runtime dependencies (requirements/runtime.txt) as
wheels. Keyed by a hash of its inputs: prints "unchanged" and does nothing when
the wheelhouse already matches the source.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

INPUTS = ("pyproject.toml", "requirements/runtime.txt")
TREES = ("mco_py", "bpf")


def source_hash(repo: Path) -> str:
    h = hashlib.sha256()
    files = [repo / f for f in INPUTS]
    for tree in TREES:
        if (repo / tree).is_dir():
            files += sorted(p for p in (repo / tree).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for f in files:
        h.update(str(f.relative_to(repo)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def main() -> int:
    repo, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    # One build at a time per wheelhouse: playbook runs and test tiers may start together.
    with (out.parent / f".{out.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return build(repo, out)


def build(repo: Path, out: Path) -> int:
    if (repo / "bpf" / "Makefile").is_file() and shutil.which("clang"):
        # Best effort: without clang/BTF the collector falls back to tracefs.
        subprocess.run(["make", "-s", "-C", str(repo / "bpf")], check=False)
    digest = source_hash(repo)
    stamp = out / ".source-sha256"
    if stamp.is_file() and stamp.read_text().strip() == digest:
        print("unchanged")
        return 0
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp), str(repo)], check=True)
    subprocess.run([*pip, "wheel", "-w", str(tmp), "-r", str(repo / "requirements" / "runtime.txt")], check=True)
    shutil.copy(repo / "requirements" / "runtime.txt", tmp / "runtime.txt")
    (tmp / ".source-sha256").write_text(digest + "\n")
    # One deterministic archive (sorted, zero mtimes): hosts receive a single file
    # whose checksum changes only when a wheel does.
    with tarfile.open(tmp / "wheelhouse.tar", "w", format=tarfile.PAX_FORMAT) as tar:
        for f in sorted(tmp.iterdir()):
            if f.name == "wheelhouse.tar":
                continue
            info = tar.gettarinfo(str(f), arcname=f.name)
            info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode = 0, 0, 0, "", "", 0o644
            with f.open("rb") as fh:
                tar.addfile(info, fh)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(f"built {out} ({sum(1 for _ in out.glob('*.whl'))} wheels)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
