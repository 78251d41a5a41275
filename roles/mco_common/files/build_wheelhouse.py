#!/usr/bin/env python3
"""Build MCO's wheelhouses on the Ansible controller, one per host architecture and package set.

Usage: build_wheelhouse.py SOURCE WHEELHOUSE [--arch ARCH ...]

SOURCE is a checkout of the repository (the mco_py wheel is built from it, with
the CO-RE BPF object when `make -C bpf` can build it) or a built collection's
files/wheelhouse (which holds the mco_py wheel). Either has the pinned locks
requirements/node.txt (every host: the collector) and requirements/control.txt
(the analyzer and the extender: the node set and the Kubernetes client).

For each ARCH (default: this machine's; x86_64 and aarch64 are supported) the
pinned wheels for CPython 3.11 on manylinux are fetched from pip's configured
index (`pip config list`; this script names none) into WHEELHOUSE/ARCH/wheels,
and one archive per set is written: WHEELHOUSE/ARCH/node.tar and control.tar,
each with its wheels, the mco_py wheel, runtime.txt (the set's pins) and
.source-sha256. Hosts receive one archive and need no registry. Keyed by a hash
of the inputs: prints "unchanged ARCH" and does nothing for an architecture
whose archives match the source, so a WHEELHOUSE built on a connected machine
and copied to an offline controller is used as it is.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import platform
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

#: Host architecture (``uname -m``, Ansible's ``ansible_facts.architecture``) -> manylinux platform
#: tags pip may take wheels of (glibc 2.28 and older: Debian 11+, RHEL 8+).
PLATFORMS: dict[str, tuple[str, ...]] = {
    arch: tuple(f"{tag}_{arch}" for tag in ("manylinux1", "manylinux2010", "manylinux2014", "manylinux_2_28"))
    for arch in ("x86_64", "aarch64")
}
PYTHON = "3.11"
SETS = ("node", "control")
TREES = ("mco_py", "bpf")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


class BuildError(Exception):
    """What the operator has to fix, in one message."""


def pins(lock: Path) -> list[tuple[str, str]]:
    """The ``name==version`` lines of ``lock`` and of the locks it includes with ``-r``."""
    out: list[tuple[str, str]] = []
    for raw in lock.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            out += pins(lock.parent / line[3:].strip())
        elif line:
            match = PIN.match(line)
            if not match:
                raise BuildError(f"{lock}: {line!r} is not pinned as name==version")
            out.append((match[1], match[2]))
    return out


def normal(name: str) -> str:
    """A distribution name as wheel file names spell it."""
    return re.sub(r"[-_.]+", "_", name).lower()


def source_hash(source: Path, arch: str) -> str:
    h = hashlib.sha256(f"{arch} {PYTHON} {' '.join(PLATFORMS[arch])}\n".encode())
    h.update(Path(__file__).read_bytes())  # a change to how archives are made makes new ones
    files = sorted((source / "requirements").glob("*.txt"))
    if (source / "pyproject.toml").is_file():
        files.append(source / "pyproject.toml")
        for tree in TREES:
            if (source / tree).is_dir():
                files += sorted(p for p in (source / tree).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    else:
        files += sorted(source.glob("mco_py-*.whl"))
    for f in files:
        h.update(str(f.relative_to(source)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def mco_py_wheel(source: Path, into: Path) -> Path:
    """The mco_py wheel in ``into``: built from a checkout, or copied from a built collection."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    if (source / "pyproject.toml").is_file():
        if (source / "bpf" / "Makefile").is_file() and shutil.which("clang"):
            # Best effort: without clang/BTF the collector falls back to tracefs.
            subprocess.run(["make", "-s", "-C", str(source / "bpf")], check=False)
        subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(into), str(source)], check=True)
    else:
        for wheel in source.glob("mco_py-*.whl"):
            shutil.copy2(wheel, into / wheel.name)
    found = sorted(into.glob("mco_py-*.whl"))
    if len(found) != 1:
        raise BuildError(f"{source}: expected one mco_py wheel, found {[w.name for w in found] or 'none'}")
    return found[0]


def download(source: Path, wheels: Path, arch: str) -> None:
    """Fetch the control set's pinned wheels (a superset of the node set's) for ``arch``."""
    argv = [sys.executable, "-m", "pip", "--disable-pip-version-check", "download", "-q", "-d", str(wheels)]
    argv += [f"--platform={tag}" for tag in PLATFORMS[arch]]
    argv += ["--python-version", PYTHON, "--implementation", "cp", "--abi", "cp311", "--only-binary=:all:"]
    argv += ["-r", str(source / "requirements" / "control.txt")]
    run = subprocess.run(argv, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise BuildError(
            f"pip could not fetch the pinned wheels for {arch} (CPython {PYTHON}, manylinux) from its configured "
            f"index: {run.stderr.strip()[-1500:]}\nCheck `pip config list` and the network of this controller; "
            "an offline controller takes a wheelhouse directory built with this script on a connected machine "
            "(docs/user-guide.md, 'Install on a cluster')."
        )


def wheel_for(wheels: Path, name: str, version: str) -> Path:
    parts = ((w, w.name.split("-")) for w in wheels.glob("*.whl"))
    found = [w for w, (dist, have, *_) in parts if (normal(dist), have) == (normal(name), version)]
    if len(found) != 1:
        names = [w.name for w in found] or "none"
        raise BuildError(f"{wheels}: expected one wheel of {name}=={version}, found {names}")
    return found[0]


def archive(files: list[Path], into: Path) -> None:
    """One deterministic archive (sorted, zero mtimes): its checksum changes only when a file does."""
    with tarfile.open(into, "w", format=tarfile.PAX_FORMAT) as tar:
        for f in sorted(files, key=lambda p: p.name):
            info = tar.gettarinfo(str(f), arcname=f.name)
            info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode = 0, 0, 0, "", "", 0o644
            with f.open("rb") as fh:
                tar.addfile(info, fh)


def build(source: Path, out: Path, arch: str) -> str:
    digest = source_hash(source, arch)
    stamp = out / ".source-sha256"
    if stamp.is_file() and stamp.read_text().strip() == digest and all((out / f"{s}.tar").is_file() for s in SETS):
        return f"unchanged {arch}"
    wheels = out / "wheels"  # kept between builds: pip fetches only what changed
    tmp = out / "tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for d in (wheels, tmp):
        d.mkdir(parents=True, exist_ok=True)
    for old in wheels.glob("mco_py-*.whl"):
        old.unlink()
    mco_py = mco_py_wheel(source, wheels)
    download(source, wheels, arch)
    counts = []
    for name in SETS:
        wanted = pins(source / "requirements" / f"{name}.txt")
        (tmp / name).mkdir()
        runtime = tmp / name / "runtime.txt"
        runtime.write_text(f"# MCO's {name} set for {arch}\n" + "".join(f"{n}=={v}\n" for n, v in wanted))
        # the set in the build's name: a host moved to the other set is not "current" (venv_check.py)
        (tmp / name / ".source-sha256").write_text(f"{digest}-{name}\n")
        files = [mco_py, runtime, tmp / name / ".source-sha256", *(wheel_for(wheels, n, v) for n, v in wanted)]
        archive(files, tmp / f"{name}.tar")
        counts.append(f"{name}: {len(files) - 2} wheels")
    for name in SETS:
        (tmp / f"{name}.tar").replace(out / f"{name}.tar")
    stamp.write_text(digest + "\n")
    shutil.rmtree(tmp)
    return f"built {out} ({', '.join(counts)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path)
    parser.add_argument("wheelhouse", type=Path)
    parser.add_argument("--arch", action="append", help=f"host architecture: {', '.join(PLATFORMS)} (repeatable)")
    args = parser.parse_args(argv)
    source, out = args.source.resolve(), args.wheelhouse.resolve()
    arches = list(dict.fromkeys(args.arch or [platform.machine()]))
    unsupported = [a for a in arches if a not in PLATFORMS]
    if unsupported:
        parser.error(
            f"no wheels for architecture {', '.join(unsupported)}: MCO's wheelhouse is built for "
            f"{' and '.join(PLATFORMS)} (CPython {PYTHON}, manylinux)"
        )
    if not (source / "requirements" / "control.txt").is_file():
        parser.error(f"{source} holds no requirements/control.txt: give a checkout or a collection's files/wheelhouse")
    out.mkdir(parents=True, exist_ok=True)
    # One build at a time per wheelhouse: playbook runs and test tiers may start together.
    with (out / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            for arch in arches:
                print(build(source, out / arch, arch))
        except BuildError as exc:
            print(f"build_wheelhouse: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
