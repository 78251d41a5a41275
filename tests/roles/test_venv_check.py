"""mco_common's venv_check.py: a converged venv is "current" without pip; every difference is named."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from .helpers import REPO

SCRIPT = REPO / "roles" / "mco_common" / "files" / "venv_check.py"


def check(wheelhouse: Path, stamp: Path) -> str:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(wheelhouse), str(stamp)], capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Path:
    (tmp_path / ".source-sha256").write_text("abc123\n")
    pins = [f"msgspec=={metadata.version('msgspec')}", f"PyYAML=={metadata.version('PyYAML')}"]
    (tmp_path / "runtime.txt").write_text("# a lock\n" + "\n".join(pins) + "\n")
    return tmp_path


def test_the_venv_this_wheelhouse_installed_is_current(wheelhouse: Path, tmp_path: Path) -> None:
    stamp = tmp_path / "stamp"
    stamp.write_text("abc123\n")
    assert check(wheelhouse, stamp) == "current"


def test_another_build_or_none_recorded_is_not_current(wheelhouse: Path, tmp_path: Path) -> None:
    stamp = tmp_path / "stamp"
    assert check(wheelhouse, stamp) == "the venv was installed from no recorded build"
    stamp.write_text("def456\n")
    assert check(wheelhouse, stamp) == "the venv was installed from another build"


def test_each_package_at_another_version_or_missing_is_named(wheelhouse: Path, tmp_path: Path) -> None:
    stamp = tmp_path / "stamp"
    stamp.write_text("abc123\n")
    lock = wheelhouse / "runtime.txt"
    lock.write_text(lock.read_text() + "msgspec==0.0.1\nno-such-package-mco==1.0\n")
    have = metadata.version("msgspec")
    assert check(wheelhouse, stamp) == f"msgspec is {have}, not 0.0.1; no-such-package-mco is not installed"
