"""Every port the docs give for a part is the port its role listens on by default."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _default(role: str, variable: str) -> int:
    return int(yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())[variable])


#: A phrase naming a part's port, and the role variable that sets it.
PHRASES = {
    r"gRPC,? (?:port \(?|:)(98\d\d)\b": ("mco_analyzer", "mco_analyzer_grpc_port"),
    r"\b(98\d\d) gRPC": ("mco_analyzer", "mco_analyzer_grpc_port"),
    r"extender's (?:HTTP )?port \((98\d\d)\)": ("mco_scheduler_extender", "mco_scheduler_extender_port"),
}


def test_the_docs_name_each_part_by_its_port() -> None:
    wrong = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text()
        for pattern, (role, variable) in PHRASES.items():
            for found in re.finditer(pattern, text):
                if int(found.group(1)) != _default(role, variable):
                    line = text.count("\n", 0, found.start()) + 1
                    wrong.append(f"{path.relative_to(ROOT)}:{line}: {found.group(0)!r}, but {variable} is "
                                 f"{_default(role, variable)}")  # fmt: skip
    assert not wrong, "\n".join(wrong)
