"""The docs' example outputs are what the commands print (tests/docs/examples.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.examples import DOCS, EXAMPLES, OUTPUT_LANGUAGES, ROOT, blocks, check, difference, documented, write

#: Output blocks no test produces yet: (document, the start of its first line) -> what would
#: produce it. Every other unlabelled or ``text`` block is an example or a figure; this may only shrink.
UNCHECKED: dict[tuple[str, str], str] = {}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", [n for n, e in EXAMPLES.items() if e.produced_by == "here"])
def test_the_example_is_what_the_command_prints(name: str) -> None:
    produce = EXAMPLES[name].produce
    assert produce is not None
    check(name, produce())


@pytest.mark.parametrize("name", [n for n, e in EXAMPLES.items() if e.produced_by != "here"])
def test_an_example_produced_elsewhere_is_checked_there(name: str) -> None:
    runner = ROOT / EXAMPLES[name].produced_by
    assert re.search(rf'\bcheck(?:_example)?\("{name}", ', runner.read_text()), f"{runner} does not check {name!r}"


def test_every_output_block_is_an_example_or_a_figure() -> None:
    loose = {
        b.where(): b.text
        for doc in DOCS
        for b in blocks(doc)
        if b.language in OUTPUT_LANGUAGES and b.example is None and not b.figure
    }
    known = {where for where, text in loose.items() for doc, start in UNCHECKED
             if where.startswith(f"{doc}:") and text.startswith(start)}  # fmt: skip
    new = {where: text.splitlines()[0] if text else "" for where, text in loose.items() if where not in known}
    assert not new, (
        "mark each block that shows a command's output `<!-- example: NAME -->` (and add NAME to "
        f"tests/docs/examples.py), each diagram or synopsis `<!-- figure -->`; unmarked: {new}"
    )
    assert len(known) == len(UNCHECKED), f"take the blocks now produced out of UNCHECKED (still there: {known})"
    marked = [b.example for doc in DOCS for b in blocks(doc) if b.example is not None]
    assert sorted(marked) == sorted(EXAMPLES), "each example in EXAMPLES is marked on exactly one block"


def test_a_different_output_fails_and_write_puts_it_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("# Doc\n\n<!-- example: doctor-host -->\n```text\nCHECK  VERDICT\nold    ok\n```\n\nafter\n")
    monkeypatch.setattr("tests.docs.examples.DOCS", (doc,))
    assert documented("doctor-host").text == "CHECK  VERDICT\nold    ok\n"
    printed = "CHECK  VERDICT\nnew    fail     pid 4321 (/x/python -m mco_py.cli collector --config c)   \n"
    assert "+new    fail     pid <pid> (python -m mco_py.cli collector --config c)" in difference(
        "doctor-host", printed
    )
    with pytest.raises(AssertionError, match="is not what the command prints"):
        check("doctor-host", printed)
    assert write("doctor-host", printed)
    assert doc.read_text() == (
        "# Doc\n\n<!-- example: doctor-host -->\n```text\nCHECK  VERDICT\n"
        "new    fail     pid <pid> (python -m mco_py.cli collector --config c)\n```\n\nafter\n"
    )
    check("doctor-host", printed)
