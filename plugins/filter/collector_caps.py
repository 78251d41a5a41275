# Copyright: Many-Core Orchestrator authors
# Mulan PSL v2 (see LICENSE)
"""``grantable_caps``: the capabilities of a list the host can grant (those in its bounding set).

A container's bounding set may lack some (this project's CI VM lacks CAP_SYS_RESOURCE); raising
one into the ambient set that the bounding set lacks fails the service's start.
"""

from __future__ import annotations

import re
from typing import Any

#: linux/capability.h
CAP_BITS = {
    "CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3, "CAP_NET_ADMIN": 12,
    "CAP_NET_RAW": 13, "CAP_IPC_LOCK": 14, "CAP_SYS_PTRACE": 19, "CAP_SYS_ADMIN": 21, "CAP_SYS_RESOURCE": 24,
    "CAP_SYSLOG": 34, "CAP_PERFMON": 38, "CAP_BPF": 39, "CAP_CHECKPOINT_RESTORE": 40,
}  # fmt: skip


def grantable_caps(caps: list[str], proc_status: str) -> list[str]:
    """``caps`` (CAP_* names) kept in order when ``proc_status`` (``/proc/self/status``) has them in CapBnd."""
    match = re.search(r"^CapBnd:\s*([0-9a-fA-F]+)$", proc_status, re.MULTILINE)
    if match is None:
        return list(caps)
    bounding = int(match.group(1), 16)
    unknown = [c for c in caps if c.upper() not in CAP_BITS]
    if unknown:
        raise ValueError(f"unknown capability name(s) {unknown}; known: {sorted(CAP_BITS)}")
    return [c for c in caps if bounding >> CAP_BITS[c.upper()] & 1]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"grantable_caps": grantable_caps}
