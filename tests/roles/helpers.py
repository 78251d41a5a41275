"""Load role plugins by path and run Ansible commands from the repository root."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def load_module(relative_path: str, name: str) -> ModuleType:
    """Import a role's Python file (module or filter plugin) as ``name``."""
    spec = importlib.util.spec_from_file_location(name, REPO / relative_path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def ansible_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        }
    )
    env.update(extra)
    return env


def run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=REPO, env=ansible_env(**env), capture_output=True, text=True, timeout=300, check=False
    )


def adhoc_json(module: str, args: str, module_path: str) -> dict[str, Any]:
    """Run ``ansible localhost -m module`` and return the module result."""
    proc = run(
        [str(BIN / "ansible"), "localhost", "-M", module_path, "-m", module, "-a", args],
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = json.loads(proc.stdout)
    result: dict[str, Any] = document["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return result
