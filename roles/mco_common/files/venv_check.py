"""Say whether a venv holds what a wheelhouse installs, without running pip (pip takes seconds to start).

Usage: VENV/bin/python venv_check.py WHEELHOUSE STAMP
Prints "current" when STAMP (written after the last install) names this wheelhouse's build
(its .source-sha256) and every requirement of WHEELHOUSE/runtime.txt and mco-py are installed
at their versions; otherwise one line saying what differs. Reads only; exit status 0 either way.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path


def differences(wheelhouse: Path, stamp: Path) -> list[str]:
    build = (wheelhouse / ".source-sha256").read_text().strip()
    installed = stamp.read_text().strip() if stamp.is_file() else ""
    if installed != build:
        return [f"the venv was installed from {'another build' if installed else 'no recorded build'}"]
    out = []
    wanted = [line.split("#", 1)[0].strip() for line in (wheelhouse / "runtime.txt").read_text().splitlines()]
    for name, _, version in (line.partition("==") for line in wanted if line):
        try:
            have = metadata.version(name.strip())
        except metadata.PackageNotFoundError:
            out.append(f"{name.strip()} is not installed")
            continue
        if version and have != version.strip():
            out.append(f"{name.strip()} is {have}, not {version.strip()}")
    try:
        metadata.version("mco-py")
    except metadata.PackageNotFoundError:
        out.append("mco-py is not installed")
    return out


def main(argv: list[str]) -> int:
    problems = differences(Path(argv[1]), Path(argv[2]))
    print("; ".join(problems) if problems else "current")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
