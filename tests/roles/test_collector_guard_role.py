"""The mco_collector role's guard switch: the configuration it writes is one the collector accepts,
and the unit gets write access to the cgroup tree (and CAP_DAC_OVERRIDE) only when the guard is on."""

from __future__ import annotations

from pathlib import Path

import pytest

from mco_py.analysis.guard import GuardRules
from tests.config.settings import collector_settings

from .helpers import render_template


def render(template: str, dest: Path, variables: dict[str, object]) -> str:
    return render_template("mco_collector", template, dest, {"__mco_collector_caps": [], **variables})


def test_guard_on_writes_a_configuration_the_collector_accepts(tmp_path: Path) -> None:
    text = render(
        "collector.yaml.j2",
        tmp_path / "collector.yaml",
        {
            "mco_collector_guard": "on",
            "mco_collector_guard_online_cgroups": ["online.slice"],
            "mco_collector_guard_offline_cgroups": ["offline.slice", "kubepods.slice/kubepods-besteffort.slice"],
            "mco_collector_guard_rules": {"throttleAbove": 15, "floor": 0.2},
        },
    )
    settings = collector_settings(text)
    assert settings.guard.mode == "on"
    assert settings.offline_cgroups == ("offline.slice", "kubepods.slice/kubepods-besteffort.slice")
    assert settings.guard.rules.rules() == GuardRules(throttle_above=15, floor=0.2)
    assert str(settings.guard.journal) == "/var/lib/mco-collector/guard-limits.json"


def test_guard_off_keeps_only_the_journal_path(tmp_path: Path) -> None:
    text = render("collector.yaml.j2", tmp_path / "collector.yaml", {})
    settings = collector_settings(text)
    assert settings.guard.mode == "off"
    assert not settings.offline_cgroups
    # where a killed guard's journal is, so that a start with the guard off still writes it back
    assert str(settings.guard.journal) == "/var/lib/mco-collector/guard-limits.json"


@pytest.mark.parametrize(("mode", "writable"), [("on", True), ("dry-run", False), ("off", False)])
def test_only_an_active_guard_may_write_cgroups(tmp_path: Path, mode: str, writable: bool) -> None:
    unit = render("mco-collector.service.j2", tmp_path / "mco-collector.service", {"mco_collector_guard": mode})
    assert ("ProtectControlGroups=no" in unit) is writable
    assert ("ProtectControlGroups=yes" in unit) is not writable
    assert "StateDirectory=mco-collector" in unit
    # in every mode, as root before the collector: what a killed guard left is written back
    assert "ExecStartPre=-+/opt/mco/venv/bin/mco collector --config /etc/mco/collector.yaml --restore-guard" in unit


def test_supervisor_writes_back_a_killed_guards_limits_before_dropping_root(tmp_path: Path) -> None:
    conf = render(
        "mco-collector.supervisor.conf.j2", tmp_path / "mco-collector.conf", {"__mco_collector_caps": ["CAP_BPF"]}
    )
    command = next(line for line in conf.splitlines() if line.startswith("command="))
    restore, _, rest = command.partition("--restore-guard; exec setpriv ")
    assert restore.startswith('command=/bin/sh -c "/opt/mco/venv/bin/mco collector --config /etc/mco/collector.yaml')
    assert rest.endswith('-- /opt/mco/venv/bin/mco collector --config /etc/mco/collector.yaml"')
