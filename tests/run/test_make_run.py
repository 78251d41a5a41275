"""The README's `make run` on this host, then the user guide's and runbooks' host commands on it.

Every command here comes from the docs' own text (tests.docs.doc_commands), so a doc that
tells an operator something this host cannot do fails here. It deploys standalone MCO to
this host (root: /opt/mco, MCO's supervisord, ports 9876-9879) and removes it at the end with
the runbook's uninstall: the `run` tier of `make test`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import mco_py
from tests.docs.doc_commands import select

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "user-guide.md"
RUNBOOKS = ROOT / "docs" / "runbooks.md"
#: placeholders of the docs, filled for this host
HERE = {"$INV": "inventory/local.yml", "HOST": "127.0.0.1", "NODE": "127.0.0.1"}

pytestmark = [
    pytest.mark.run,
    pytest.mark.timeout(900),
    pytest.mark.skipif(os.geteuid() != 0, reason="make run deploys to this host: needs root"),
]


def sh(command: str, cwd: Path = ROOT, timeout: float = 600) -> str:
    """Run one documented command as an operator's shell would; fail with its output."""
    env = dict(os.environ, PATH=f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}", ANSIBLE_NOCOLOR="1")
    env.pop("KUBECONFIG", None)  # a standalone host: `mco report` reads its file, not a cluster
    out = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert out.returncode == 0, f"`{command}` exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


@pytest.fixture(scope="module")
def deployed() -> Iterator[None]:
    (run,) = select(GUIDE, "Try it on one machine (standalone)", r"^make run$")
    assert select(GUIDE, "Install on a cluster", r"^make run$") == [run]  # the same command, mentioned again
    output = sh(run)
    assert "NODE" in output, output  # the report's table...
    assert os.uname().nodename in output, output  # ...with this host in it
    try:
        yield
    finally:
        (stop,) = select(GUIDE, "Try it on one machine (standalone)", r"^make stop$")
        sh(stop)
        (uninstall,) = select(RUNBOOKS, "Uninstall", r"uninstall[.]yml", HERE)
        sh(uninstall)


def test_make_report_shows_this_host(deployed: None) -> None:
    (report,) = select(GUIDE, "Try it on one machine (standalone)", r"^make report$")
    assert os.uname().nodename in sh(report)


def test_the_services_run_under_mcos_supervisord(deployed: None) -> None:
    (status,) = select(GUIDE, "Try it on one machine (standalone)", r"^supervisorctl ")
    lines = sh(status).splitlines()
    assert sorted(line.split()[0] for line in lines if "RUNNING" in line) == [
        "mco-analyzer",
        "mco-collector",
        "mco-extender",
    ], lines


def test_mco_report_on_the_host_in_every_form(deployed: None) -> None:
    commands = select(RUNBOOKS, "Deploy", r"/opt/mco/venv/bin/mco report") + select(
        RUNBOOKS, "Troubleshoot", r"^mco report"
    )
    assert {"/opt/mco/venv/bin/mco report", "mco report", "mco report -o wide", "mco report -o json"} <= set(commands)
    outputs = {command: sh(command) for command in commands}
    for command, out in outputs.items():
        if command.endswith("-o json"):
            status = json.loads(out)  # the report's status document
            assert [n["name"] for n in status["nodes"]] == [os.uname().nodename]
        else:
            assert os.uname().nodename in out, (command, out)
    (guide,) = select(GUIDE, "Try it on one machine (standalone)", r"^mco report$")
    assert os.uname().nodename in sh(guide)


def test_mco_version_names_the_deployed_version(deployed: None) -> None:
    (version,) = select(GUIDE, "Try it on one machine (standalone)", r"^mco --version$")
    # the same MCO version (the checkout's venv and the host's may run different Python builds)
    deployed_version = sh("/opt/mco/venv/bin/mco version")
    assert sh(version).split(" (")[0] == deployed_version.split(" (")[0] == f"mco {mco_py.__version__}"


def test_mco_doctor_passes_on_the_make_run_host(deployed: None, tmp_path: Path) -> None:
    doctor, as_json, bundle = select(RUNBOOKS, "Troubleshoot", r"^mco doctor(?! --cluster)")
    (diagnostics,) = select(RUNBOOKS, "Troubleshoot", r"^make diagnostics$")
    table = sh(doctor)  # exit 0: every check ok
    assert table.splitlines()[-1].startswith("verdict: ok"), table
    # the deployed mco, the same checks (under `make test`, make adds its own "Leaving directory" lines)
    verdicts = [line for line in sh(diagnostics).splitlines() if line.startswith("verdict: ")]
    assert len(verdicts) == 1, verdicts
    assert verdicts[0].startswith("verdict: ok"), verdicts
    document = json.loads(sh(as_json))
    assert document["verdict"] == "ok"
    names = {check["name"] for check in document["checks"]}
    assert {"collector stream", "analyzer leader", "analyzer rules", "extender mode"} <= names
    sh(bundle.replace("/tmp/", f"{tmp_path}/"))
    assert (tmp_path / "mco-doctor.tar.gz").stat().st_size > 0


def test_the_health_and_metrics_checks_answer(deployed: None) -> None:
    ready, metrics = select(RUNBOOKS, "Upgrade", r"^curl ", HERE)
    assert sh(ready).strip()
    assert "mco_node_interference_level{" in sh(metrics)
    (stream,) = select(RUNBOOKS, "Troubleshoot", r"^curl ", HERE)
    assert "mco_collector_stream" in sh(stream)


def test_every_metric_the_alerts_use_is_exported(deployed: None) -> None:
    """The alerting rules (roles/mco_crds/files/prometheus-rules.yaml) watch series a running MCO has."""
    exported: set[str] = set()
    for port in (9877, 9878, 9879):  # collector, analyzer, extender
        text = sh(f"curl -sf http://127.0.0.1:{port}/metrics")
        exported |= {line.split("{")[0].split()[0] for line in text.splitlines() if line and not line.startswith("#")}
    rules = yaml.safe_load((ROOT / "roles" / "mco_crds" / "files" / "prometheus-rules.yaml").read_text())
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    used = {name for expr in exprs for name in re.findall(r"\bmco_\w+", expr)}
    assert used, "the alerts watch MCO's metrics"
    assert used <= exported, f"not exported by a running MCO: {sorted(used - exported)}"


def test_the_collector_shows_each_signal_once(deployed: None) -> None:
    (once,) = select(RUNBOOKS, "Troubleshoot", r"^mco collector --once")
    sample = json.loads(sh(once))
    assert sample, "one sample with its signals"


def test_the_rules_tools_work_on_a_rules_file(deployed: None, tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(sh("mco rules default"))
    (validate,) = select(RUNBOOKS, "Troubleshoot", r"^mco rules validate")
    (migrate,) = select(RUNBOOKS, "Troubleshoot", r"^mco rules migrate")
    assert "valid" in sh(validate, cwd=tmp_path)
    assert "version" in sh(migrate, cwd=tmp_path)


def _supervised_pids() -> dict[str, str]:
    (status,) = select(GUIDE, "Try it on one machine (standalone)", r"^supervisorctl ")
    out = subprocess.run(["bash", "-c", status], capture_output=True, text=True, check=False).stdout
    return {m[1]: m[2] for m in re.finditer(r"^(mco-\S+)\s+RUNNING\s+pid (\d+)", out, re.M)}


def test_a_new_mco_py_restarts_every_program(deployed: None) -> None:
    """An upgrade's new package restarts all three programs, the extender (set up last) too."""
    before = _supervised_pids()
    assert sorted(before) == ["mco-analyzer", "mco-collector", "mco-extender"], before
    Path("/opt/mco/wheelhouse.tar").unlink()  # the next run copies it again and reinstalls mco_py
    sh("ansible-playbook -i inventory/local.yml playbooks/mco.yml")  # MCO's part of make run's site.yml
    deadline = time.monotonic() + 30  # a program restarted last may still be starting
    while True:
        after = _supervised_pids()
        kept = {name for name in before if after.get(name, before[name]) == before[name]}
        if (sorted(after) == sorted(before) and not kept) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert sorted(after) == sorted(before), f"not all RUNNING: {after}"
    assert not kept, f"not restarted: {before} -> {after}"
