"""Cut a release of MCO: one version in galaxy.yml, mco_py and the CHANGELOG, and an annotated git tag.

Usage:
  release.py prepare X.Y.Z [--date YYYY-MM-DD]   set the version in galaxy.yml and mco_py/__init__.py
                                                 and turn the CHANGELOG's Unreleased section into
                                                 "## [X.Y.Z] - date" (a new, empty Unreleased above);
                                                 review the diff and commit it
  release.py tag X.Y.Z                           check the committed tree and create the annotated tag
                                                 vX.Y.Z whose message is the version's CHANGELOG section
`make release VERSION=X.Y.Z` runs `tag` and then builds dist/manycore-mco-X.Y.Z.tar.gz from it.

`tag` checks, and names each problem with its fix: the working tree is clean; galaxy.yml's
version and mco_py.__version__ are X.Y.Z; the CHANGELOG has a "## [X.Y.Z] - YYYY-MM-DD" section
with entries, below Unreleased and above every older version; no tag vX.Y.Z exists; X.Y.Z is
newer than every vX.Y.Z tag. It pushes nothing.
"""

from __future__ import annotations

import argparse
import datetime
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
VERSION = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
RELEASED = re.compile(r"^## \[(?P<version>[^\]]+)\] - (?P<date>\d{4}-\d{2}-\d{2})$", re.MULTILINE)
UNRELEASED = "## Unreleased"
INIT = Path("mco_py") / "__init__.py"
INIT_VERSION = re.compile(r'(?m)^__version__ = "([^"]*)"$')


class ReleaseError(Exception):
    """What stops a release: one line per problem, each with its fix."""


def key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def git(root: Path, *argv: str) -> str:
    run = subprocess.run(["git", "-C", str(root), *argv], capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise ReleaseError(f"git {' '.join(argv)}: {run.stderr.strip()}")
    return run.stdout


def real_date(text: str) -> bool:
    try:
        return datetime.date.fromisoformat(text).isoformat() == text
    except ValueError:
        return False


def sections(changelog: str) -> list[tuple[str, str, str]]:
    """The released sections of a CHANGELOG, in order: (version, date, body)."""
    found = list(RELEASED.finditer(changelog))
    out = []
    for match, after in zip(found, [*found[1:], None], strict=True):
        end = after.start() if after else len(changelog)
        out.append((match["version"], match["date"], changelog[match.end() : end].strip()))
    return out


def prepare(root: Path, version: str, date: str) -> list[str]:
    """Set ``version`` everywhere and date the Unreleased section; the files changed."""
    changelog = (root / "CHANGELOG.md").read_text()
    if any(v == version for v, _, _ in sections(changelog)):
        raise ReleaseError(f"CHANGELOG.md already has a section for {version}: tag it with `release.py tag {version}`")
    if UNRELEASED not in changelog:
        raise ReleaseError(f"CHANGELOG.md has no '{UNRELEASED}' section to release: add the changes there first")
    head, _, rest = changelog.partition(UNRELEASED + "\n")
    if not RELEASED.split(rest, maxsplit=1)[0].strip():
        raise ReleaseError(f"CHANGELOG.md's '{UNRELEASED}' section is empty: nothing to release")
    (root / "CHANGELOG.md").write_text(f"{head}{UNRELEASED}\n\n## [{version}] - {date}\n{rest}")
    galaxy = root / "galaxy.yml"
    text, count = re.subn(r"(?m)^version: \S+", f"version: {version}", galaxy.read_text())
    if count != 1:
        raise ReleaseError("galaxy.yml has no 'version:' line to set")
    galaxy.write_text(text)
    init = root / INIT
    text, count = INIT_VERSION.subn(f'__version__ = "{version}"', init.read_text())
    if count != 1:
        raise ReleaseError(f"{INIT} has no __version__ line to set")
    init.write_text(text)
    return ["CHANGELOG.md", "galaxy.yml", str(INIT)]


def problems(root: Path, version: str) -> list[str]:
    """Why ``version`` cannot be tagged at HEAD of ``root`` (empty: it can)."""
    out = []
    if git(root, "status", "--porcelain", "--untracked-files=no").strip():
        out.append("the working tree has uncommitted changes: commit them (the tag names a commit, not them)")
    galaxy = yaml.safe_load((root / "galaxy.yml").read_text())["version"]
    if str(galaxy) != version:
        out.append(f"galaxy.yml's version is {galaxy}: set it to {version} (release.py prepare {version})")
    init = INIT_VERSION.search((root / INIT).read_text())
    if not init or init[1] != version:
        out.append(f"{INIT}'s __version__ is {init[1] if init else 'missing'}: set it to {version}")
    changelog = (root / "CHANGELOG.md").read_text()
    released = sections(changelog)
    mine = [(v, d, body) for v, d, body in released if v == version]
    if not mine:
        out.append(f"CHANGELOG.md has no '## [{version}] - YYYY-MM-DD' section (release.py prepare {version})")
    else:
        (_, date, body), index = mine[0], [v for v, _, _ in released].index(version)
        if not real_date(date):
            out.append(f"CHANGELOG.md's section for {version} has the date {date}: give a real YYYY-MM-DD")
        if not body:
            out.append(f"CHANGELOG.md's section for {version} is empty: say what changed")
        older = [v for v, _, _ in released[index + 1 :] if VERSION.match(v) and key(v) >= key(version)]
        if older:
            out.append(f"CHANGELOG.md's section for {version} is above {', '.join(older)}: newest first")
        if changelog.find(UNRELEASED) > changelog.find(f"## [{version}]"):
            out.append(f"CHANGELOG.md's '{UNRELEASED}' section must come before {version}'s")
    tags = [t.removeprefix("v") for t in git(root, "tag", "--list", "v*").split()]
    if version in tags:
        out.append(f"the tag v{version} exists already: a release is tagged once (pick the next version)")
    newer = [t for t in tags if VERSION.match(t) and key(t) > key(version)]
    if newer:
        out.append(f"v{max(newer, key=key)} is tagged already: a release must be newer than every tagged one")
    return out


def tag(root: Path, version: str) -> str:
    found = problems(root, version)
    if found:
        raise ReleaseError("\n".join(f"- {p}" for p in found))
    (_, date, body) = next(s for s in sections((root / "CHANGELOG.md").read_text()) if s[0] == version)
    git(root, "tag", "--annotate", f"v{version}", "--cleanup=verbatim", "-m", f"MCO {version} ({date})\n\n{body}\n")
    return f"v{version}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    prep = sub.add_parser("prepare", help="set the version and date the Unreleased section")
    prep.add_argument("version")
    prep.add_argument("--date", default=datetime.datetime.now(datetime.UTC).date().isoformat())
    tagging = sub.add_parser("tag", help="check the committed tree and create the annotated tag vX.Y.Z")
    tagging.add_argument("version")
    args = parser.parse_args(argv)
    if not VERSION.match(args.version):
        parser.error(f"the version must be X.Y.Z (numbers, as galaxy.yml and wheels accept), got {args.version!r}")
    if args.action == "prepare" and not real_date(args.date):
        parser.error(f"--date must be a date as YYYY-MM-DD, got {args.date!r}")
    try:
        if args.action == "prepare":
            changed = prepare(ROOT, args.version, args.date)
            print(f"{args.version}: set in {', '.join(changed)}; review, commit, then `release.py tag {args.version}`")
        else:
            print(f"tagged {tag(ROOT, args.version)}")
    except ReleaseError as exc:
        print(f"release {args.version}: cannot {args.action}:\n{exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
