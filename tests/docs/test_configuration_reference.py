"""The references document every role variable and service setting exactly as the code declares them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("script", ["gen_role_docs.py", "gen_settings_docs.py"])
def test_reference_is_up_to_date(script: str) -> None:
    """Role variables (argument_specs) and service settings (mco_py/config/) as their docs show them."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr


def test_defaults_and_argument_specs_agree() -> None:
    """Every input in defaults/main.yml is in argument_specs with the same default, and vice versa."""
    problems = []
    for spec_file in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        role_dir = spec_file.parent.parent
        options = yaml.safe_load(spec_file.read_text())["argument_specs"]["main"].get("options", {})
        defaults_file = role_dir / "defaults" / "main.yml"
        defaults = yaml.safe_load(defaults_file.read_text()) or {} if defaults_file.exists() else {}
        for name in sorted(set(defaults) - set(options)):
            problems.append(f"{role_dir.name}: {name} is in defaults/main.yml but not in argument_specs")
        for name, opt in options.items():
            if name not in defaults and not opt.get("required"):
                problems.append(f"{role_dir.name}: {name} is in argument_specs but has no default in defaults/main.yml")
            elif "default" in opt and name in defaults and opt["default"] != defaults[name]:
                problems.append(
                    f"{role_dir.name}: {name} default differs: spec {opt['default']!r} vs defaults {defaults[name]!r}"
                )
    assert not problems, "\n".join(problems)
