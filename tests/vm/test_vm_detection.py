"""Detection on pure cgroup v2 with the TCG node's own kernel: the antagonists that raise a
node's cpu and io dimensions on this host's hybrid kernel (the protection tier, bench/protection)
raise the same dimensions there, through the collector's own sources and the analyzer's scorer
with the shipped rules, and the levels fall back once they end (tests/vm/guest.py, detection).
The guest's CPU is emulated and much slower than the host's: the bounds are wide, and the
figures are printed for docs/vm-node.md."""

from __future__ import annotations

from typing import Any

import pytest

from tests.vm.runner import Results, shared

pytestmark = [pytest.mark.vm, pytest.mark.slow, pytest.mark.timeout(600)]
QUIET = ("None", "Low")
HOT = ("Medium", "High")


def test_a_cpu_and_a_disk_antagonist_raise_their_own_dimensions_and_the_levels_fall_back(
    shared_results: Results,
) -> None:
    got: Any = shared(shared_results, "detection")
    phases = got["phases"]
    assert got["backends"]["psi"] == "procfs", got["backends"]
    assert all(level in QUIET for level in phases["calm"]["highest"].values()), phases["calm"]
    cpu, disk = phases["cpu"], phases["disk"]
    assert cpu["highest"].get("cpu") in HOT, cpu
    assert cpu["medium_after_s"]["cpu"] <= 15, "four busy loops on two CPUs: Medium within 15 s"
    assert cpu["highest"].get("io", "None") in QUIET, "a CPU antagonist is not an I/O one"
    assert phases["after cpu"]["last"].get("cpu", "None") in QUIET, phases["after cpu"]
    assert disk["highest"].get("io") in HOT, disk
    assert disk["medium_after_s"]["io"] <= 15, "two O_DIRECT writers: Medium within 15 s"
    assert phases["after disk"]["last"].get("io", "None") in QUIET, phases["after disk"]
