#!/usr/bin/python
# Copyright: Many-Core Orchestrator authors
# Mulan PSL v2 (see LICENSE)
"""Which process listens on each of some TCP ports (from /proc; no ss, no psutil needed)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mco_port_owners
short_description: Name the process listening on each TCP port
description:
  - Reads the listening sockets from C(/proc/net/tcp) and C(/proc/net/tcp6) and finds the
    process holding each through C(/proc/PID/fd), so it works on a minimal host.
  - Returns, per port, the command names of the listeners (empty when the port is free).
  - Needs root to see other users' processes (a listener it cannot attribute is named C(?)).
version_added: "0.1.0"
author: Many-Core Orchestrator authors
options:
  ports:
    description: TCP ports to look at.
    type: list
    elements: int
    required: true
  proc_root:
    description: Where procfs is mounted.
    type: path
    default: /proc
"""

EXAMPLES = r"""
- name: Who holds MCO's ports
  mco_port_owners:
    ports: [9876, 9878, 9879]
  register: owners
"""

RETURN = r"""
owners:
  description: Port (as a string) to the sorted command names listening on it.
  type: dict
  returned: always
  sample: {"9876": ["mco"], "9879": []}
"""

import os  # noqa: E402 - Ansible modules import after DOCUMENTATION
from pathlib import Path  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

LISTEN = "0A"


def listening_inodes(proc: Path, ports: set[int]) -> dict[str, int]:
    """Socket inode -> port, for the listening TCP sockets on one of ``ports``."""
    found: dict[str, int] = {}
    for table in ("net/tcp", "net/tcp6"):
        try:
            lines = (proc / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != LISTEN:
                continue
            port = int(fields[1].rsplit(":", 1)[1], 16)
            if port in ports:
                found[fields[9]] = port
    return found


def owners(proc: Path, ports: list[int]) -> dict[str, list[str]]:
    inodes = listening_inodes(proc, set(ports))
    named: dict[int, set[str]] = {port: set() for port in ports}
    seen: set[str] = set()
    for pid in (p for p in os.listdir(proc) if p.isdigit()):
        try:
            fds = os.listdir(proc / pid / "fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(proc / pid / "fd" / fd)
            except OSError:
                continue
            inode = target[len("socket:[") : -1] if target.startswith("socket:[") else ""
            if inode in inodes:
                try:
                    comm = (proc / pid / "comm").read_text().strip()
                except OSError:
                    comm = "?"
                named[inodes[inode]].add(comm)
                seen.add(inode)
    for inode, port in inodes.items():
        if inode not in seen:
            named[port].add("?")
    return {str(port): sorted(names) for port, names in named.items()}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "ports": {"type": "list", "elements": "int", "required": True},
            "proc_root": {"type": "path", "default": "/proc"},
        },
        supports_check_mode=True,
    )
    module.exit_json(changed=False, owners=owners(Path(module.params["proc_root"]), module.params["ports"]))


if __name__ == "__main__":
    main()
