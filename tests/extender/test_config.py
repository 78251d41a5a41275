"""Extender settings: defaults, camelCase keys, validation naming the key, flags override."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mco_py.config.extender import SPEC, ExtenderSettings
from mco_py.config.loader import load, parse_document, read_document
from mco_py.errors import ConfigError
from mco_py.extender.main import add_arguments, build_config


def config_from_mapping(doc: object, *, source: str = "extender.yaml") -> ExtenderSettings:
    return load(SPEC, document=doc, source=source).settings  # type: ignore[arg-type]


def load_config(path: Path, *, required: bool = False) -> ExtenderSettings:
    return load(SPEC, document=read_document(path, required=required), source=str(path)).settings


def from_argv(*argv: str, env: dict[str, str] | None = None):
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return build_config(parser.parse_args(argv), env or {})


def test_defaults_match_the_seed_arguments(tmp_path):
    cfg = load_config(tmp_path / "absent.yaml")
    assert cfg == ExtenderSettings()
    assert cfg.cr_name == "cluster"
    assert cfg.policy.ttl_seconds == 30
    assert dict(cfg.policy.hard_constraints) == {"psiMemoryFullAvg10": 0.0, "psiIoSomeAvg10": 20.0}
    assert cfg.policy.fallback_when_outdated
    assert cfg.volcano_reply == "1.9"
    assert cfg.policy.kata_runtime_class_prefixes == ("kata",)
    assert cfg.address == ("0.0.0.0", 9879)


def test_full_file(tmp_path):
    path = tmp_path / "extender.yaml"
    path.write_text(
        "mode: cluster\ncrName: other\ncrStatusTTLSeconds: 5\nfallbackWhenCROutdated: false\n"
        "hardConstraints:\n  psiMemoryFullAvg10: null\n  psiIoSomeAvg10Threshold: 35\n  bioLatencyP99Ms: 50\n"
        "volcanoVersion: 1.12\nkataRuntimeClassPrefixes: [kata, secure]\nscoreWeight: 2\nunknownScore: 40\n"
        "listen: 127.0.0.1:0\nreportFile: /tmp/r.json\nkubeconfig: /k\nmaxBodyBytes: 2048\ndecoder: stdlib\n"
    )
    loaded = load(SPEC, document=read_document(path, required=True), source=str(path))
    cfg = loaded.settings
    assert cfg.mode == "cluster"
    assert cfg.cr_name == "other"
    assert cfg.kubeconfig == "/k"
    assert dict(cfg.policy.hard_constraints) == {"psiIoSomeAvg10": 35.0, "bioLatencyP99Ms": 50.0}
    assert cfg.volcano_reply == "1.10"
    assert cfg.policy.score_weight == 2.0
    assert cfg.policy.unknown_score == 40
    assert cfg.address == ("127.0.0.1", 0)
    assert cfg.report_file == Path("/tmp/r.json")
    assert not cfg.policy.fallback_when_outdated
    assert loaded.notes == (
        f"{path}: decoder: ignored: the extender always decodes with msgspec; remove it from the file",
    )
    assert cfg.max_body_bytes == 2048


@pytest.mark.parametrize(
    ("doc", "names"),
    [
        ({"crStatusTTLSeconds": "30s"}, "crStatusTTLSeconds"),
        ({"crStatusTTLSeconds": 0}, "crStatusTTLSeconds"),
        ({"hardConstraints": {"psiBogus": 1}}, "hardConstraints: unknown signal.*psiBogus"),
        ({"hardConstraints": {"psiIoSomeAvg10": "high"}}, "hardConstraints.psiIoSomeAvg10: expected float"),
        ({"hardConstraints": {"psiIoSomeAvg10": float("nan")}}, "hardConstraints.psiIoSomeAvg10: expected a finite"),
        ({"idleTimeoutSeconds": float("inf")}, "idleTimeoutSeconds: expected a finite number"),
        ({"hardConstraints": [1]}, "hardConstraints"),
        ({"volcanoVersion": "1.8"}, "volcanoVersion"),
        ({"volcanoVersion": "latest"}, "volcanoVersion"),
        ({"mode": "k8s"}, "mode"),
        ({"listen": "9879"}, "listen"),
        ({"listen": ":99999"}, "listen"),
        ({"scoreWeight": -1}, "scoreWeight"),
        ({"unknownScore": 101}, "unknownScore"),
        ({"kataRuntimeClassPrefixes": [""]}, "kataRuntimeClassPrefixes: expected str of length >= 1"),
        ({"fallbackWhenCROutdated": "yes"}, "fallbackWhenCROutdated"),
        ({"maxBodyBytes": 10}, "maxBodyBytes"),
        ({"crname": "x"}, "crname"),
    ],
)
def test_bad_values_name_the_file_and_the_key(doc, names):
    with pytest.raises(ConfigError, match="^extender.yaml: " + names):
        config_from_mapping(doc, source="extender.yaml")


def test_bad_yaml_and_required_missing_file(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("a: [")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml", required=True)


def test_flags_override_the_environment_and_the_file(tmp_path):
    path = tmp_path / "extender.yaml"
    path.write_text("crStatusTTLSeconds: 10\nlisten: ':1'\nscoreWeight: 3\n")
    loaded = from_argv(
        "--config", str(path), "--listen", "127.0.0.1:0", "--ttl-seconds", "3", "--volcano-version", "v1.10.0",
        env={"MCO_EXTENDER_SCORE_WEIGHT": "2", "MCO_EXTENDER_LISTEN": ":2"},
    )  # fmt: skip
    cfg = loaded.settings
    assert (cfg.address, cfg.policy.ttl_seconds, cfg.volcano_reply, cfg.mode, cfg.score_weight) == (
        ("127.0.0.1", 0),
        3.0,
        "1.10",
        "standalone",
        2.0,
    )
    assert loaded.notes == ("--ttl-seconds is now --cr-status-ttl-seconds; rename it (the old flag is still read)",)
    with pytest.raises(ConfigError, match="^" + re.escape("--listen: listen: 'nope' is not")):
        from_argv("--listen", "nope")
    with pytest.raises(
        ConfigError, match="^" + re.escape("--cr-status-ttl-seconds: crStatusTTLSeconds: expected float > 0")
    ):
        from_argv("--cr-status-ttl-seconds", "0")
    with pytest.raises(
        ConfigError, match="^" + re.escape("environment MCO_EXTENDER_SCORE_WEIGHT: scoreWeight: expected float >= 0")
    ):
        from_argv(env={"MCO_EXTENDER_SCORE_WEIGHT": "-1"})


@pytest.mark.parametrize("mode", ["standalone", "cluster"])
def test_the_ansible_template_renders_a_valid_config(mode):
    """roles/mco_scheduler_extender renders /etc/mco/extender.yaml: its keys must be the ones we read."""
    import json

    import jinja2
    import yaml

    root = Path(__file__).resolve().parents[2] / "roles" / "mco_scheduler_extender"
    template = root / "templates" / "extender.yaml.j2"
    if not template.is_file():
        pytest.fail(f"{template} is missing: the role and the config loader must agree on the file")
    defaults = yaml.safe_load((root / "defaults" / "main.yml").read_text())
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["comment"] = lambda text: f"# {text}"
    env.filters["to_json"] = json.dumps
    env.filters["bool"] = bool
    values = {k: v for k, v in defaults.items() if not (isinstance(v, str) and "{{" in v)}
    values.update(
        ansible_managed="Ansible managed",
        mco_scheduler_extender_mode=mode,
        mco_scheduler_extender_report_file="/var/lib/mco/report.json",
        mco_scheduler_extender_kubeconfig="/etc/mco/extender.kubeconfig",
        __mco_scheduler_extender_tls={},  # vars/main.yml's, without mco_pki's files (tests/roles/test_web_settings.py)
    )
    rendered = env.from_string(template.read_text()).render(**values)
    loaded = load(SPEC, document=parse_document(rendered, "rendered extender.yaml"), source="rendered extender.yaml")
    assert loaded.notes == ()
    cfg = loaded.settings
    assert cfg.mode == mode
    assert cfg.address[1] == defaults["mco_scheduler_extender_port"]
    assert cfg.policy.ttl_seconds == defaults["mco_scheduler_extender_cr_status_ttl_seconds"]
    assert dict(cfg.policy.hard_constraints) == {
        "psiMemoryFullAvg10": defaults["mco_scheduler_extender_psi_memory_full_avg10"],
        "psiIoSomeAvg10": defaults["mco_scheduler_extender_psi_io_some_avg10_threshold"],
    }
    assert cfg.kubeconfig == ("/etc/mco/extender.kubeconfig" if mode == "cluster" else "")
