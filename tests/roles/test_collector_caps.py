"""The collector gets only the capabilities its host can grant (raising a missing one fails its start)."""

from __future__ import annotations

import pytest

from .helpers import load_module

caps = load_module("plugins/filter/collector_caps.py", "collector_caps")

# CapBnd of this project's CI VM: every capability up to CAP_CHECKPOINT_RESTORE but CAP_SYS_RESOURCE (24).
STATUS = "Name:\tpython3\nCapInh:\t0000000000000000\nCapBnd:\t000001fffeffffff\nCapAmb:\t0000000000000000\n"


def test_capabilities_missing_from_the_bounding_set_are_left_out_in_order() -> None:
    wanted = ["CAP_BPF", "CAP_PERFMON", "CAP_SYS_RESOURCE", "CAP_DAC_READ_SEARCH"]
    assert caps.grantable_caps(wanted, STATUS) == ["CAP_BPF", "CAP_PERFMON", "CAP_DAC_READ_SEARCH"]
    assert caps.grantable_caps([], STATUS) == []


def test_a_full_bounding_set_keeps_everything_and_no_capbnd_line_keeps_the_list() -> None:
    full = STATUS.replace("000001fffeffffff", "000001ffffffffff")
    assert caps.grantable_caps(["CAP_SYS_RESOURCE", "CAP_BPF"], full) == ["CAP_SYS_RESOURCE", "CAP_BPF"]
    assert caps.grantable_caps(["CAP_BPF"], "Name:\tx\n") == ["CAP_BPF"]


def test_an_unknown_capability_name_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown capability name"):
        caps.grantable_caps(["CAP_FLY"], STATUS)
