"""`mco` command line: version and rules validation, run as a user would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mco_py

MCO = [sys.executable, "-m", "mco_py.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MCO, *args], capture_output=True, text=True, timeout=60, check=False)


def test_version() -> None:
    out = run("version")
    assert out.returncode == 0
    assert out.stdout.startswith(f"mco {mco_py.__version__}")


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "mco"
    out = subprocess.run([str(script), "version"], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr


def test_validate_default_rules(tmp_path: Path) -> None:
    default = run("rules", "default")
    assert default.returncode == 0
    path = tmp_path / "rules.yaml"
    path.write_text(default.stdout)
    out = run("rules", "validate", str(path))
    assert out.returncode == 0, out.stderr
    assert "valid (version" in out.stdout


def test_wrong_typed_rules_exit_1_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text('version: "1"\nsignals:\n  psiCpuSomeAvg10:\n    warn: 20\n    critical: [50]\n')
    out = run("rules", "validate", str(path))
    assert out.returncode == 1
    assert "signals.psiCpuSomeAvg10.critical: expected a number, got a list" in out.stderr


def test_missing_file_exit_1(tmp_path: Path) -> None:
    out = run("rules", "validate", str(tmp_path / "nope.yaml"))
    assert out.returncode == 1
    assert "cannot read" in out.stderr
