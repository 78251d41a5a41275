"""Runs tests/vm/guest.py's scenarios on the TCG test node (testbed/vm.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

from testbed import vm

SKIP_ENV = "MCO_TEST_SKIP_VM"
GUEST = Path(__file__).with_name("guest.py")
#: What guest.py imports besides the standard library.
GUEST_PACKAGES = ("mco_py", "msgspec", "prometheus_client", "yaml")
#: One scenario's boot, run and power-off, at most.
RUN_TIMEOUT = 240.0


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
