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

import yaml

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


#: The paths mco_common publishes for the service roles with its defaults (roles/mco_common/tasks/main.yml).
COMMON_SETUP = {
    "install_dir": "/opt/mco",
    "venv": "/opt/mco/venv",
    "site_packages": "/opt/mco/venv/lib/python3.11/site-packages",
    "config_dir": "/etc/mco",
    "state_dir": "/var/lib/mco",
    "log_dir": "/var/log/mco",
    "user": "mco",
    "repo_root": str(REPO),
}


def render_template(role: str, template: str, dest: Path, variables: dict[str, object]) -> str:
    """``role``'s template rendered by Ansible with the role's defaults and vars, what the mco role and
    mco_common give it (the switches, the paths) and ``variables``."""
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults/main.yml").read_text())
    internal_file = REPO / "roles" / role / "vars/main.yml"
    internal = yaml.safe_load(internal_file.read_text()) if internal_file.exists() else {}
    extra = dest.with_suffix(".vars.json")
    extra.write_text(
        json.dumps({**defaults, **internal, "ansible_facts": {"nodename": "node-1"}, "mco_common_setup": COMMON_SETUP,
                    "mco_collector_enabled": True, "mco_analyzer_enabled": True, **variables})
    )  # fmt: skip
    proc = run(
        [str(BIN / "ansible"), "localhost", "-c", "local", "-e", f"@{extra}", "-m", "ansible.builtin.template",
         "-a", f"src={REPO / 'roles' / role / 'templates' / template} dest={dest}"]
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dest.read_text()


def render_with_inventory(role: str, template: str, dest: Path, inventory: dict[str, Any]) -> str:
    """``role``'s template rendered by ``ansible-playbook`` on the first host of ``inventory`` (a YAML
    inventory as a dict: groups and hostvars, as the controller sees them) with the role's defaults
    and vars: for templates that read ``groups`` and ``hostvars``."""
    role_dir = REPO / "roles" / role
    # the role's defaults as the weakest variables (under the inventory's), its vars/main.yml above them
    defaults = yaml.safe_load((role_dir / "defaults/main.yml").read_text())
    top = inventory["all"]
    inv = dest.with_suffix(".inventory.json")
    inv.write_text(json.dumps({"all": {**top, "vars": {**defaults, **top.get("vars", {})}}}))
    play = dest.with_suffix(".play.yml")
    vars_files = [str(role_dir / "vars/main.yml")] if (role_dir / "vars/main.yml").exists() else []
    play.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "all[0]",
                    "gather_facts": False,
                    "vars_files": vars_files,
                    "tasks": [
                        {
                            "ansible.builtin.copy": {
                                "content": "{{ lookup('ansible.builtin.template', '%s') }}"
                                % (role_dir / "templates" / template),
                                "dest": str(dest),
                                "mode": "0644",
                            },
                            "delegate_to": "localhost",
                        }
                    ],
                }
            ]
        )
    )
    python = f"ansible_python_interpreter={sys.executable}"
    proc = run([str(BIN / "ansible-playbook"), "-i", str(inv), "-c", "local", "-e", python, str(play)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dest.read_text()
