"""MCO's alerting rules: valid for Prometheus, unit-tested with `promtool test rules`, every alert tested.

promtool comes from Debian's `prometheus` package (`make setup` installs it as root). The two
promtool commands are docs/operations.md's own (Alerts), run as written.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.docs.doc_commands import select

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "roles" / "mco_crds" / "files" / "prometheus-rules.yaml"
UNIT_TESTS = Path(__file__).with_name("alerts-test.yaml")
OPERATIONS = ROOT / "docs" / "operations.md"

pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool missing: run make setup as root (Debian package prometheus)"
)


def promtool(command: str) -> subprocess.CompletedProcess[str]:
    """Run a documented ``promtool ...`` command from the repository; fail with its output."""
    out = subprocess.run(command.split(), cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, f"{command}:\n{out.stdout}\n{out.stderr}"
    return out


def alerts() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_the_rules_file_is_valid_and_the_alerts_fire_as_their_unit_tests_say() -> None:
    check, unit = select(OPERATIONS, "Alerts", r"^promtool ")
    assert check == f"promtool check rules {RULES.relative_to(ROOT)}"
    assert f"SUCCESS: {len(alerts())} rules found" in promtool(check).stdout
    assert unit == f"promtool test rules {UNIT_TESTS.relative_to(ROOT)}"
    assert "SUCCESS" in promtool(unit).stdout


def test_every_alert_is_documented() -> None:
    text = OPERATIONS.read_text()
    for rule in alerts():
        assert f"| `{rule['alert']}` | {rule['labels']['severity']} |" in text, rule["alert"]


def test_every_alert_is_tested_firing_and_silent() -> None:
    cases = [case for test in yaml.safe_load(UNIT_TESTS.read_text())["tests"] for case in test["alert_rule_test"]]
    for rule in alerts():
        mine = [case for case in cases if case["alertname"] == rule["alert"]]
        assert any(case["exp_alerts"] for case in mine), f"{rule['alert']}: no case where it fires"
        assert any(not case["exp_alerts"] for case in mine), f"{rule['alert']}: no case where it stays silent"


def test_every_alert_says_what_broke_and_how_severe() -> None:
    for rule in alerts():
        assert rule["alert"].startswith("MCO"), rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
        assert set(rule["annotations"]) - {"runbook_url"} == {"summary", "description"}, rule["alert"]


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a document's headings (lower case, punctuation dropped, spaces to dashes)."""
    heads = re.findall(r"(?m)^#+ (.+)$", markdown)
    return {re.sub(r"[^\w\- ]", "", head.strip().lower()).replace(" ", "-") for head in heads}


def test_every_runbook_url_leads_to_a_section_of_the_runbooks() -> None:
    repository = yaml.safe_load((ROOT / "galaxy.yml").read_text())["repository"]
    sections = anchors((ROOT / "docs" / "runbooks.md").read_text())
    linked = {rule["alert"]: rule["annotations"].get("runbook_url") for rule in alerts()}
    assert linked["MCOCredentialExpiringSoon"]
    assert linked["MCOCredentialExpired"]
    for alert, url in linked.items():
        if url is None:
            continue
        page, _, anchor = url.partition("#")
        assert page == f"{repository}/blob/main/docs/runbooks.md", alert
        assert anchor in sections, f"{alert}: no section #{anchor} in docs/runbooks.md"
