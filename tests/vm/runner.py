"""Runs tests/vm/guest.py's scenarios on the TCG test node (testbed/vm.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NoReturn

import pytest

from testbed import vm

SKIP_ENV = "MCO_TEST_SKIP_VM"
GUEST = Path(__file__).with_name("guest.py")
#: What guest.py imports besides the standard library.
GUEST_PACKAGES = ("mco_py", "msgspec", "prometheus_client", "yaml")
#: One scenario's boot, run and power-off, at most.
RUN_TIMEOUT = 240.0
#: The scenarios that share one boot (:func:`shared_boot`), in the order they run: detection
#: first, on the calm fresh guest; each later one after guest.py's reset.
SHARED = ("detection", "cpu_weight", "cpu_max", "guard_cpu", "memory_high", "io_max", "restore_after_kill")
#: Their boot, runs and power-off, at most (within the tests' 600 s: the first test's setup runs them).
SHARED_TIMEOUT = 540.0
#: Each shared scenario's figures (or its error), by name.
Results = dict[str, dict[str, object]]


def unavailable(why: str) -> NoReturn:
    """Fail (or, with MCO_TEST_SKIP_VM=1, skip) saying what the vm tier is missing."""
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{SKIP_ENV}=1: {why}")
    pytest.fail(f"the vm tier cannot run: {why} (set {SKIP_ENV}=1 to skip it)", pytrace=False)


def scenario(node: vm.Node, name: str, *, cpus: int = 2) -> dict[str, object]:
    """Boot ``node``, run the scenario ``name``, return its figures (with the boot and run
    times); the console's end in the error when it failed."""
    payload = vm.Payload(command=("python3", "/mnt/guest.py", name), files={"guest.py": GUEST},
                         python_packages=GUEST_PACKAGES)  # fmt: skip
    outcome = vm.run(node, payload, timeout=RUN_TIMEOUT, cpus=cpus)
    result = outcome.checked()
    result["boot_s"] = outcome.boot_seconds
    result["wall_s"] = round(outcome.wall_seconds, 1)
    print(f"{name}: {result}")  # the figures docs/vm-node.md quotes (pytest -rP shows them)
    return result


def shared_boot(node: vm.Node) -> Results:
    """Boot ``node`` once and run every scenario of :data:`SHARED` in it (guest.py resets the
    guest between them): each scenario's figures, or ``{"error": ...}`` for one that raised.
    The boot's failure raises, with the console's end."""
    payload = vm.Payload(command=("python3", "/mnt/guest.py", *SHARED), files={"guest.py": GUEST},
                         python_packages=GUEST_PACKAGES)  # fmt: skip
    outcome = vm.run(node, payload, timeout=SHARED_TIMEOUT, cpus=2)
    got: Any = outcome.checked()["scenarios"]
    print(f"shared boot: boot_s={outcome.boot_seconds} wall_s={round(outcome.wall_seconds, 1)}")
    return {name: got[name] for name in SHARED}


def shared(results: Results, name: str) -> dict[str, object]:
    """Scenario ``name``'s figures from :func:`shared_boot`; the test fails with the guest's
    traceback when the scenario raised."""
    result = results[name]
    if "error" in result:
        pytest.fail(f"scenario {name} raised in the guest:\n{result['error']}", pytrace=False)
    print(f"{name}: {result}")  # the figures docs/vm-node.md quotes (pytest -rP shows them)
    return result
