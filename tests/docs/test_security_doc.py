"""docs/security.md shows exactly the `kubectl auth can-i` table that the cluster tier checks."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cluster_tests.identities import IDENTITIES

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(
    r"^\| `(?P<sa>mco-[a-z-]+)` \| (?P<verb>\w+) \| `(?P<res>[^`]+)` \| (?P<ns>[^|]+) \| (?P<ans>yes|no) \|$"
)


def test_can_i_table_matches_the_checked_identities() -> None:
    documented: dict[str, list[tuple[str, str, str, str]]] = {}
    for line in (ROOT / "docs" / "security.md").read_text().splitlines():
        if m := ROW.match(line):
            ns = m["ns"].strip()
            documented.setdefault(m["sa"], []).append((m["ans"], m["verb"], m["res"], "" if ns == "(cluster)" else ns))
    assert documented == IDENTITIES, "docs/security.md's can-i table differs from tests/cluster_tests/identities.py"
