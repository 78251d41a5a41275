#!/usr/bin/env python3
"""Inventory script for booted-node scenarios: the bed's name, paths and ssh settings as plain values.

Ansible templates a variable each time a task reads it, on every host: written as Jinja in
testbed.yml, these (read by the connection of every task) took a third of the controller's CPU
in a converged run. Computed here once per ``ansible-playbook``, from the environment molecule
sets:

- the bed: the scenario name (letters and digits, at most 14) and the first 6 hex digits of the
  SHA-1 of the checkout's path, so scenarios of different clones never share names;
- the state directory: ``$MCO_TESTBED_STATE``, default ``/run/mco-testbed``.

``bed.py --list`` prints the inventory (group variables only; the scenario lists the hosts).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys

DEFAULT_STATE = "/run/mco-testbed"


def bed_name(scenario: str, project: str) -> str:
    """``mcocluster261c21`` for scenario ``mco-cluster`` in one checkout."""
    checkout = hashlib.sha1(project.encode(), usedforsecurity=False).hexdigest()[:6]  # a name, not a secret
    return re.sub("[^a-z0-9]", "", scenario)[:14] + checkout


def inventory(env: dict[str, str]) -> dict[str, object]:
    project = env.get("MOLECULE_PROJECT_DIRECTORY", "")
    bed = bed_name(env.get("MOLECULE_SCENARIO_NAME", ""), project)
    state = env.get("MCO_TESTBED_STATE") or DEFAULT_STATE
    here = f"{state}/{bed}"
    return {
        "all": {
            "vars": {
                "mco_testbed_bed": bed,
                "mco_testbed_state": state,
                "mco_testbed_project": project,
                "mco_testbed_kubeconfig": f"{here}/kubeconfig",
                # The collector-analyzer CA and certificates of this bed (made by mco_pki on the controller).
                "mco_pki_dir": f"{here}/pki",
                # The analyzer's and the extender's ServiceAccount kubeconfigs of this bed (cluster mode).
                "mco_credentials_dir": f"{here}/credentials",
            }
        },
        "mco_testbed": {
            "vars": {
                "ansible_ssh_private_key_file": f"{state}/id_ed25519",
                # One ssh master connection per bed and node: every bed has a 10.213.0.10, and
                # Ansible's default socket name (host, port, user) would send one bed's commands
                # to another's node.
                "ansible_control_path": f"%(directory)s/{bed}-%%h-%%r",
                "ansible_ssh_common_args": (
                    f'-o ProxyCommand="ip netns exec mcotb-{bed}-ctl socat - TCP:%h:%p"'
                    " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
                ),
            }
        },
        "_meta": {"hostvars": {}},
    }


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--list"]:
        json.dump(inventory(dict(os.environ)), sys.stdout)
        return 0
    if argv[1:2] == ["--host"]:
        json.dump({}, sys.stdout)
        return 0
    sys.stderr.write(f"usage: {argv[0]} --list | --host HOST (an Ansible inventory script)\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
