"""The TCG test node (testbed/vm.py) for the ``vm`` tier: built once a session; the cgroup and
detection scenarios share one boot (``shared_results``), the node's own tests boot it each.

A missing prerequisite (root, QEMU, the kernel package) fails the tier with a message naming
it; only ``MCO_TEST_SKIP_VM=1`` turns that into a skip.
"""

from __future__ import annotations

import os

import pytest

from testbed import vm
from testbed.errors import TestbedError
from tests.vm.runner import Results, shared_boot, unavailable


@pytest.fixture(scope="session")
def node() -> vm.Node:
    if os.geteuid() != 0:
        unavailable("needs root (the node's root disk is made from the root-owned node image)")
    try:
        vm.preflight()
        return vm.ensure_node()
    except TestbedError as exc:
        unavailable(str(exc))


@pytest.fixture(scope="session")
def shared_results(node: vm.Node) -> Results:
    """The figures of tests/vm/runner.py's SHARED scenarios, run in one boot of the node."""
    return shared_boot(node)
