"""Detection rules for tests that check plumbing, not timing: the defaults without hysteresis.

With the shipped hysteresis a node needs seven elevated samples before its level rises;
tests of the transport, the stores and the services want one sample to set the level.
"""

from __future__ import annotations

import dataclasses

import yaml

from mco_py.analysis.rules import DetectionRules, Hysteresis, default_rules, rules_to_mapping

#: A scored signal of the default rules (io dimension: warn 20, critical 50).
SIGNAL = "psiIoSomeRate"


def quick_rules(version: str = "quick") -> DetectionRules:
    """The default rules named ``version``, where every sample moves the level."""
    return dataclasses.replace(default_rules(), version=version, hysteresis=Hysteresis(raise_after=1, lower_after=1))


def quick_rules_text(version: str = "quick") -> str:
    """:func:`quick_rules` as a rules document."""
    return yaml.safe_dump(rules_to_mapping(quick_rules(version)), sort_keys=False)
