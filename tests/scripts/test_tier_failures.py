# SPDX-License-Identifier: MulanPSL-2.0
"""scripts/tier_failures.awk: what `make test` prints about a failed tier at the very end."""

from __future__ import annotations

import subprocess
from pathlib import Path

AWK = Path(__file__).resolve().parents[2] / "scripts" / "tier_failures.awk"

# Shaped like molecule's output: ANSI colours, "│ " prefixes, the task's JSON wrapped over lines.
MOLECULE_LOG = """\
  \x1b[2m│\x1b[0m TASK [Look for a file that may be missing]
  \x1b[2m│\x1b[0m \x1b[0;31mfatal: [localhost]: FAILED! => {"changed": false,\x1b[0m
  \x1b[2m│\x1b[0m   "msg": "not there"}\x1b[0m
  \x1b[2m│\x1b[0m ...ignoring
  \x1b[2m│\x1b[0m
  \x1b[2m│\x1b[0m TASK [Check the guard weighed the batch pod down]
  \x1b[2m│\x1b[0m \x1b[0;31mfatal: [localhost]: FAILED! => {"assertion": "__kn_on.shares | int\x1b[0m
  \x1b[2m│\x1b[0m   == 2", "changed": false, "evaluated_to": false, "msg": "weight 1024,\x1b[0m
  \x1b[2m│\x1b[0m   want 2"}\x1b[0m
  \x1b[2m│\x1b[0m
  \x1b[2m│\x1b[0m PLAY RECAP *********************************************************************
    molecule scenario kube_nodes_booted FAILED (after 501s)
"""

PYTEST_LOG = """\
tests/a/test_x.py::test_one PASSED
=========================== short summary info ============================
FAILED tests/a/test_x.py::test_two - AssertionError: 3 != 4
ERROR tests/a/test_y.py::test_three - RuntimeError: no redis-server
"""


def _summary(log: str, tmp_path: Path) -> list[str]:
    path = tmp_path / "tier.log"
    path.write_text(log, encoding="utf-8")
    done = subprocess.run(["awk", "-f", str(AWK), str(path)], capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def test_a_failed_task_is_named_with_its_assertion_and_msg_and_an_ignored_one_is_not(tmp_path: Path) -> None:
    assert _summary(MOLECULE_LOG, tmp_path) == [
        "failed task: [Check the guard weighed the batch pod down]",
        '  "assertion": "__kn_on.shares | int == 2"',
        '  "msg": "weight 1024, want 2"',
        "molecule scenario kube_nodes_booted FAILED (after 501s)",
    ]


def test_pytest_short_summary_lines_are_kept(tmp_path: Path) -> None:
    assert _summary(PYTEST_LOG, tmp_path) == [
        "FAILED tests/a/test_x.py::test_two - AssertionError: 3 != 4",
        "ERROR tests/a/test_y.py::test_three - RuntimeError: no redis-server",
    ]
