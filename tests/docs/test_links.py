"""Every relative link in the Markdown docs points at a file of the repository (and a heading there)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([*ROOT.glob("*.md"), *ROOT.glob("docs/**/*.md"), *ROOT.glob("roles/*/README.md")])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def anchors(markdown: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+\s+(.*)$", CODE.sub("", markdown.read_text()), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def broken_links(markdown: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for target in LINK.findall(CODE.sub("", markdown.read_text())):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (markdown.parent / path).resolve() if path else markdown
        if not dest.is_relative_to(root):
            broken.append(f"{target}: outside the repository")
        elif not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(root)}")
    return broken


@pytest.mark.parametrize("markdown", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(markdown: Path) -> None:
    assert broken_links(markdown) == []


def test_the_checker_catches_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text(
        "# Top\n\n[ok](a.md#top) [gone](missing.md) [bad](a.md#nowhere) [out](../x.md) `[code](x.md)`\n"
    )
    assert broken_links(tmp_path / "a.md", root=tmp_path) == [
        "missing.md: no such file",
        "a.md#nowhere: no heading #nowhere in a.md",
        "../x.md: outside the repository",
    ]
