"""The shell commands the user guide and the runbooks tell an operator to run.

    python -m tests.docs.doc_commands list docs/runbooks.md [SECTION...] [--match REGEX] [--var NAME=VALUE...]

prints them as JSON (``[{"section", "line", "command", "inline"}]``): every line of a fenced
``sh`` block (comments dropped, ``\\`` continuations joined) and every inline code span that
starts with a program an operator runs (:data:`PROGRAMS`). ``--var`` fills the placeholders the
docs use (``$INV``, ``HOST``, ``NODE``...) and ``--match`` keeps the commands a regular expression
finds: a step runs the docs' own words, not a copy. tests/docs/test_doc_commands.py checks that
every command is selected by some test or molecule step (:data:`tests.docs.test_doc_commands.RUNNERS`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

#: Programs whose inline mentions are commands (a bare `mco report` in prose is one too).
PROGRAMS = (
    "make",
    "kubectl",
    "curl",
    "systemctl",
    "supervisorctl",
    "journalctl",
    "ansible-playbook",
    "ansible-galaxy",
    "mco",
    ".venv/bin/ansible-playbook",
    "/opt/mco/venv/bin/mco",
)
_INLINE = re.compile(r"`([^`\n]+)`")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$")


@dataclass(frozen=True)
class Command:
    section: str
    line: int
    command: str
    inline: bool


def _strip_comment(line: str) -> str:
    # a `#` after whitespace starts a comment (no command in these docs quotes one)
    return re.split(r"\s+#\s", line, maxsplit=1)[0].rstrip()


def _is_command(span: str) -> bool:
    first = span.split(maxsplit=1)[0] if span.strip() else ""
    return first in PROGRAMS and span != first  # `kubectl` alone names the program, it runs nothing


def commands(doc: Path) -> list[Command]:
    """Every command of ``doc``, in order, with the heading it is under."""
    found: list[Command] = []
    section, fence, pending, pending_line = "", None, "", 0
    for number, raw in enumerate(doc.read_text().splitlines(), start=1):
        if fence is not None:
            if raw.startswith("```"):
                fence = None
                continue
            if fence != "sh":
                continue
            line = _strip_comment(raw) if not raw.lstrip().startswith("#") else ""
            if line.endswith("\\"):
                pending, pending_line = pending + line[:-1].strip() + " ", pending_line or number
                continue
            text = (pending + line.strip()).strip()
            if text:
                found.append(Command(section, pending_line or number, text, inline=False))
            pending, pending_line = "", 0
            continue
        if raw.startswith("```"):
            fence = raw[3:].strip()
            continue
        heading = _HEADING.match(raw)
        if heading:
            section = heading.group(1)
            continue
        for span in _INLINE.findall(raw):
            if _is_command(span):
                found.append(Command(section, number, span, inline=True))
    return found


def fill(command: str, variables: dict[str, str]) -> str:
    """Replace whole-word placeholders (``$INV``, ``HOST``) with their values."""
    for name, value in sorted(variables.items(), key=lambda kv: -len(kv[0])):
        command = re.sub(rf"(?<![\w$]){re.escape(name)}(?!\w)", lambda _m, v=value: v, command)
    return command


def select(doc: Path, section: str, match: str = "", variables: dict[str, str] | None = None) -> list[str]:
    """The commands under ``section`` of ``doc`` that ``match`` finds, each once, placeholders filled.
    Raises ValueError when there are none (the docs changed under the test)."""
    chosen = list(
        dict.fromkeys(c.command for c in commands(doc) if c.section == section and re.search(match, c.command))
    )
    if not chosen:
        raise ValueError(f"{doc}: no command under {section!r} matches {match!r}")
    return [fill(c, variables or {}) for c in chosen]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.docs.doc_commands", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="print a document's commands as JSON")
    listing.add_argument("doc", type=Path)
    listing.add_argument("sections", nargs="*", help="only these headings (default: all)")
    listing.add_argument("--match", default="", metavar="REGEX", help="only commands this regex finds")
    listing.add_argument("--var", action="append", default=[], metavar="NAME=VALUE", help="fill a placeholder")
    args = parser.parse_args(argv)
    variables: dict[str, str] = {}
    for item in args.var:
        name, sep, value = item.partition("=")
        if not sep or not name:
            parser.error(f"--var takes NAME=VALUE, got {item!r}")
        variables[name] = value
    if not args.doc.is_file():
        parser.error(f"{args.doc}: no such document")
    found = commands(args.doc)
    missing = sorted(set(args.sections) - {c.section for c in found})
    if missing:
        parser.error(f"{args.doc} has no commands under {missing}; headings with commands: "
                     f"{sorted({c.section for c in found})}")  # fmt: skip
    chosen = [
        c for c in found if (not args.sections or c.section in args.sections) and re.search(args.match, c.command)
    ]
    if not chosen:
        parser.error(f"{args.doc}: no command under {args.sections or 'any heading'} matches {args.match!r}")
    out = [asdict(c) | {"command": fill(c.command, variables)} for c in chosen]
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
