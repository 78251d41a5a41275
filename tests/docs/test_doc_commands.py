"""Every command the user guide, the runbooks and the operations guide give is run by a test or a molecule step.

The runners take the commands from the docs' text (tests.docs.doc_commands: ``select`` in
pytest, ``python -m tests.docs.doc_commands list`` in molecule), by heading and a regular
expression. :data:`RUNNERS` lists those selections; this test checks that each runner really
makes its selection (its file names the heading and the expression) and that together they
cover every command. A new command in the docs fails here until something runs it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.docs.doc_commands import commands

ROOT = Path(__file__).resolve().parents[2]
GUIDE, RUNBOOKS, OPERATIONS = "docs/user-guide.md", "docs/runbooks.md", "docs/operations.md"
MOLECULE = "molecule/mco-cluster/verify.yml"
RUN = "tests/run/test_make_run.py"
PLUGIN_ROLE = "tests/cluster_tests/test_volcano_plugin_role.py"
KUBE_SCHEDULER_ROLE = "tests/cluster_tests/test_kube_scheduler_role.py"


class Runner(NamedTuple):
    doc: str
    section: str
    match: str
    runner: str
    """The file that selects and runs these commands (it names ``section`` and ``match``)."""


RUNNERS = (
    # this host, standalone: `make run` and what an operator then types on the host
    Runner(GUIDE, "Try it on one machine (standalone)", r"^make run$", RUN),
    Runner(GUIDE, "Try it on one machine (standalone)", r"^make report$", RUN),
    Runner(GUIDE, "Try it on one machine (standalone)", r"^make stop$", RUN),
    Runner(GUIDE, "Try it on one machine (standalone)", r"^supervisorctl ", RUN),
    Runner(GUIDE, "Try it on one machine (standalone)", r"^mco report$", RUN),
    Runner(GUIDE, "Try it on one machine (standalone)", r"^mco --version$", RUN),
    Runner(GUIDE, "Install on a cluster", r"^make run$", RUN),
    Runner(RUNBOOKS, "Deploy", r"/opt/mco/venv/bin/mco report", RUN),
    Runner(RUNBOOKS, "Upgrade", r"^curl ", RUN),
    Runner(RUNBOOKS, "Uninstall", r"uninstall[.]yml", RUN),
    Runner(RUNBOOKS, "Troubleshoot", r"^mco report", RUN),
    Runner(RUNBOOKS, "Troubleshoot", r"^curl ", RUN),
    Runner(RUNBOOKS, "Troubleshoot", r"^mco collector --once", RUN),
    Runner(RUNBOOKS, "Troubleshoot", r"^mco rules validate", RUN),
    Runner(RUNBOOKS, "Troubleshoot", r"^mco rules migrate", RUN),
    Runner(RUNBOOKS, "Troubleshoot", r"^supervisorctl ", RUN),
    Runner(RUNBOOKS, "Troubleshoot", r"^mco doctor(?! --cluster)", RUN),
    Runner(RUNBOOKS, "Troubleshoot", r"^mco doctor --cluster", "tests/cluster_tests/test_mco_on_real_cluster.py"),
    Runner(RUNBOOKS, "Troubleshoot", r"^make diagnostics$", RUN),
    # `make collection`, as the user guide says, builds the tarball the collection tests install
    Runner(GUIDE, "Install on a cluster", r"^make collection$", "tests/contracts/test_collection.py"),
    Runner(GUIDE, "Install on a cluster", r"build_wheelhouse[.]py", "tests/contracts/test_collection.py"),
    Runner(OPERATIONS, "Alerts", r"^promtool ", "tests/monitoring/test_alerts.py"),
    Runner(RUNBOOKS, "Credentials expire", r"^mco doctor$", "tests/doctor/test_credentials.py"),
    Runner(RUNBOOKS, "Rotate the CA", r"mco_pki_ca_rotation=", "tests/roles/test_pki.py"),
    # an existing Volcano switched to mco-plugin and back, on the real API server
    Runner(RUNBOOKS, "Volcano: mco-plugin or the extender", r"ansible-playbook", PLUGIN_ROLE),
    Runner(RUNBOOKS, "Volcano: mco-plugin or the extender", r"^kubectl ", PLUGIN_ROLE),
    # MCO's kube-scheduler installed beside the cluster's, run with the role's configuration and token, removed
    Runner(RUNBOOKS, "kube-scheduler: a second scheduler with mco-plugin", r"ansible-playbook", KUBE_SCHEDULER_ROLE),
    Runner(RUNBOOKS, "kube-scheduler: a second scheduler with mco-plugin", r"^kubectl ", KUBE_SCHEDULER_ROLE),
    # booted nodes and the real API server (molecule mco-cluster)
    Runner(GUIDE, "What you get", r"^kubectl ", MOLECULE),
    Runner(GUIDE, "Try it on one machine (standalone)", r"^systemctl ", MOLECULE),
    Runner(GUIDE, "Install on a cluster", r"^ansible-playbook -i inventory/mycluster playbooks/", MOLECULE),
    Runner(GUIDE, "Install on a cluster", r"^ansible-galaxy", MOLECULE),
    Runner(GUIDE, "Install on a cluster", r"^kubectl ", MOLECULE),
    Runner(RUNBOOKS, "Deploy", r"ansible-playbook", MOLECULE),
    Runner(RUNBOOKS, "Deploy", r"^kubectl ", MOLECULE),
    Runner(RUNBOOKS, "Change the detection rules (cluster mode)", r"ansible-playbook", MOLECULE),
    Runner(RUNBOOKS, "Upgrade", r"^ansible", MOLECULE),
    Runner(RUNBOOKS, "Rollback", r"^ansible", MOLECULE),
    Runner(RUNBOOKS, "Uninstall", r"uninstall[.]yml", MOLECULE),
    Runner(RUNBOOKS, "Rotate certificates", r"ansible-playbook", MOLECULE),
    Runner(RUNBOOKS, "Renew tokens", r"delete serviceaccount", MOLECULE),
    Runner(RUNBOOKS, "Renew tokens", r"ansible-playbook", MOLECULE),
    Runner(RUNBOOKS, "Renew tokens", r"^kubectl get nir", MOLECULE),
    Runner(RUNBOOKS, "Degrade / fallback", r"ansible-playbook", MOLECULE),
    Runner(RUNBOOKS, "Troubleshoot", r"^(systemctl|journalctl) ", MOLECULE),
    Runner(RUNBOOKS, "Troubleshoot", r"^kubectl ", MOLECULE),
)
#: Commands every `make test` runs before any test: `make test` depends on `make setup` (Makefile).
BY_MAKE_TEST = {"make setup"}


def _same(command: str) -> str:
    """A command as it runs: the venv's programs are on the PATH, and both docs' inventory
    placeholders name the operator's inventory."""
    return re.sub(r"\$INV|inventory/mycluster", "INV", command.removeprefix(".venv/bin/"))


def _documented() -> list[tuple[str, str, str]]:
    return [(doc, c.section, c.command) for doc in (GUIDE, RUNBOOKS, OPERATIONS) for c in commands(ROOT / doc)]


@pytest.mark.parametrize(("doc", "section", "command"), _documented(), ids=lambda v: str(v)[:60])
def test_each_documented_command_is_run_somewhere(doc: str, section: str, command: str) -> None:
    if command in BY_MAKE_TEST:
        assert re.search(r"(?m)^test: setup\b", (ROOT / "Makefile").read_text())
        return
    claimed = [r for r in RUNNERS if (r.doc, r.section) == (doc, section) and re.search(r.match, command)]
    # the same command elsewhere in the docs, run there, is run
    claimed += [r for d, s, c in _documented() if _same(c) == _same(command) for r in RUNNERS
                if (r.doc, r.section) == (d, s) and re.search(r.match, c)]  # fmt: skip
    assert claimed, f"{doc} ({section}): `{command}` is run by no test or molecule step; add one to RUNNERS"


@pytest.mark.parametrize("runner", RUNNERS, ids=lambda r: f"{r.runner}:{r.section}:{r.match}")
def test_each_runner_selects_what_it_claims(runner: Runner) -> None:
    text = (ROOT / runner.runner).read_text()
    assert runner.section in text, f"{runner.runner} does not select heading {runner.section!r}"
    assert runner.match in text, f"{runner.runner} does not select {runner.match!r} under {runner.section!r}"
    documented = [c.command for c in commands(ROOT / runner.doc) if c.section == runner.section]
    assert [c for c in documented if re.search(runner.match, c)], "the selection finds a command"


def test_commands_are_read_from_sh_blocks_and_inline_code(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Title\n## Part\nRun `make run` or `mco report -o wide`; not `mco_py` or `kubectl`.\n"
        "```sh\n# a comment\nmake stop   # stop\nkubectl get nir \\\n  -o yaml\n```\n"
        "```yaml\nkubectl: not a command\n```\n"
    )
    assert [(c.section, c.command, c.inline) for c in commands(doc)] == [
        ("Part", "make run", True),
        ("Part", "mco report -o wide", True),
        ("Part", "make stop", False),
        ("Part", "kubectl get nir -o yaml", False),
    ]
