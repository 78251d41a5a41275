"""Fixture trees for the collector tests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def host_tree(tmp_path: Path) -> Path:
    """A writable copy of the captured host tree (``proc/`` and ``sys/``)."""
    dest = tmp_path / "host"
    shutil.copytree(FIXTURES / "host", dest)
    return dest


def bump_psi(path: Path, *, some_us: int, full_us: int = 0) -> None:
    """Add stall time to the ``total=`` counters of a PSI file copy."""
    lines = []
    for line in path.read_text().splitlines():
        kind, *fields = line.split()
        add = some_us if kind == "some" else full_us
        fields = [f"total={int(f[6:]) + add}" if f.startswith("total=") else f for f in fields]
        lines.append(" ".join([kind, *fields]))
    path.write_text("\n".join(lines) + "\n")


def is_root() -> bool:
    return os.geteuid() == 0
