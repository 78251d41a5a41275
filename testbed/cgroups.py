"""Each Kubernetes test node in cgroups of its own, so its kubelet's pod cgroups and its pressure stay its own.

systemd-nspawn gives a node a cgroup namespace rooted at the cgroup nspawn starts in. On this
kind of host (hybrid: cpu, memory, blkio, ... on cgroup v1) that is the root of each v1
hierarchy, so a kubelet in the node would make ``/kubepods`` in the *host's* root groups, and
two nodes would share it. Started inside ``<hierarchy>/mco-testbed/<bed>/<node>`` instead, a
node sees that group as ``/``: its kubelet's ``/kubepods`` is the host's
``/mco-testbed/<bed>/<node>/kubepods``, one tree per node, removed with the node.

The v1 controller hierarchies (cpu, cpuacct, cpuset, memory, blkio, pids, devices, freezer, ...
as mounted) and the unified (v2) tree are split; ``name=systemd`` stays nspawn's. In the unified
tree nspawn puts itself in ``<node>/supervisor`` and the node in ``<node>/payload``, so each node's
``cpu.pressure``, ``memory.pressure`` and ``io.pressure`` count its own tasks only (otherwise every
node of every bed shares one ``/payload``); testbed/nodes.py shows them as the node's
``/proc/pressure``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from testbed.errors import TestbedError

TOP = "mco-testbed"
#: v1 controllers whose child groups start empty and must be given their parent's values.
_CPUSET_FILES = ("cpuset.cpus", "cpuset.mems")


def controller_trees(mountinfo: Path = Path("/proc/self/mountinfo")) -> list[Path]:
    """Mount points of the cgroup v1 controller hierarchies (named ones such as ``name=systemd`` aside)
    and of the unified (v2) tree."""
    found: list[Path] = []
    for line in mountinfo.read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2") or len(fields) < 5:
            continue
        options = tail[2].split(",")
        if tail[0] == "cgroup" and any(o.startswith("name=") for o in options):
            continue
        point = Path(fields[4])
        if point not in found:
            found.append(point)
    return found


def node_groups(bed: str, node: str, hierarchies: Sequence[Path]) -> list[Path]:
    """The node's group in each hierarchy."""
    return [h / TOP / bed / node for h in hierarchies]


def create(bed: str, node: str, *, hierarchies: Sequence[Path] | None = None) -> list[Path]:
    """Make the node's groups (and their parents); return them. cpuset groups get their parent's CPUs
    and memory nodes, which a new v1 cpuset group does not inherit."""
    groups = node_groups(bed, node, controller_trees() if hierarchies is None else hierarchies)
    for group in groups:
        hierarchy = group.parents[2]
        for path in (hierarchy / TOP, hierarchy / TOP / bed, group):
            try:
                path.mkdir()
            except FileExistsError:
                continue
            except OSError as exc:
                raise TestbedError(f"cannot make cgroup {path}: {exc.strerror}") from exc
            for name in _CPUSET_FILES:
                inherited = path.parent / name
                if inherited.exists():
                    (path / name).write_text(inherited.read_text().strip() or "\n")
    return groups


def enter_argv(groups: Sequence[Path], argv: Sequence[str]) -> list[str]:
    """``argv`` run by a shell that first moves itself into ``groups`` (``exec``: the pid stays)."""
    targets = " ".join(shlex.quote(str(g / "cgroup.procs")) for g in groups)
    return ["/bin/sh", "-c", f'set -e; for f in {targets}; do echo $$ > "$f"; done; exec "$@"', "sh", *argv]


def remove(bed: str, node: str, *, hierarchies: Sequence[Path] | None = None, timeout: float = 10.0) -> list[str]:
    """Remove the node's groups, deepest first (after its processes are gone), and the bed's and the
    top group when empty. Returns the groups that could not be removed (still busy after ``timeout``)."""
    left: list[str] = []
    for group in node_groups(bed, node, controller_trees() if hierarchies is None else hierarchies):
        if not group.is_dir():
            continue
        deadline = time.monotonic() + timeout
        while True:
            busy = _remove_tree(group)
            if not busy or time.monotonic() >= deadline:
                left += [str(p) for p in busy]
                break
            time.sleep(0.1)
        for parent in (group.parent, group.parent.parent):
            with contextlib.suppress(OSError):
                parent.rmdir()  # only when no other node or bed uses it
    return left


def _remove_tree(group: Path) -> list[Path]:
    """rmdir every group below and at ``group``, deepest first; the ones still busy."""
    busy: list[Path] = []
    for path in sorted(_walk(group), key=lambda p: len(p.parts), reverse=True):
        try:
            path.rmdir()
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY):
                raise TestbedError(f"cannot remove cgroup {path}: {exc.strerror}") from exc
            busy.append(path)
    return busy


def _walk(group: Path) -> Iterator[Path]:
    for dirpath, _dirnames, _files in os.walk(group):
        yield Path(dirpath)


def leftovers(bed: str | None = None, *, hierarchies: Sequence[Path] | None = None) -> list[str]:
    """Groups of a bed (or of every bed) still on this host."""
    found: list[str] = []
    for hierarchy in controller_trees() if hierarchies is None else hierarchies:
        top = hierarchy / TOP
        if not top.is_dir():
            continue
        beds = [top / bed] if bed else sorted(p for p in top.iterdir() if p.is_dir())
        found += [str(p) for b in beds if b.is_dir() for p in sorted(b.iterdir()) if p.is_dir()]
    return found
