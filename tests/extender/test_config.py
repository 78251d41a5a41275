"""Extender config file: defaults, camelCase keys, validation naming the key, flags override."""

from __future__ import annotations

from pathlib import Path

import pytest

from mco_py.errors import ConfigError
from mco_py.extender.config import ExtenderConfig, config_from_mapping, load_config, with_overrides


def test_defaults_match_the_seed_arguments(tmp_path):
    cfg = load_config(tmp_path / "absent.yaml")
    assert cfg == ExtenderConfig()
    assert cfg.cr_name == "cluster"
    assert cfg.policy.ttl_seconds == 30
    assert dict(cfg.policy.hard_constraints) == {"psiMemoryFullAvg10": 0.0, "psiIoSomeAvg10": 20.0}
    assert cfg.policy.fallback_when_outdated
    assert cfg.volcano_version == "1.9"
    assert cfg.policy.kata_runtime_class_prefixes == ("kata",)
    assert cfg.port == 9879


def test_full_file(tmp_path):
    path = tmp_path / "extender.yaml"
    path.write_text(
        "mode: cluster\ncrName: other\ncrStatusTTLSeconds: 5\nfallbackWhenCROutdated: false\n"
        "hardConstraints:\n  psiMemoryFullAvg10: null\n  psiIoSomeAvg10Threshold: 35\n  bioLatencyP99Ms: 50\n"
        "volcanoVersion: 1.12\nkataRuntimeClassPrefixes: [kata, secure]\nscoreWeight: 2\nunknownScore: 40\n"
        "listen: 127.0.0.1:0\nreportFile: /tmp/r.json\nkubeconfig: /k\nmaxBodyBytes: 2048\ndecoder: stdlib\n"
    )
    cfg = load_config(path, required=True)
    assert cfg.mode == "cluster"
    assert cfg.cr_name == "other"
    assert cfg.kubeconfig == "/k"
    assert dict(cfg.policy.hard_constraints) == {"psiIoSomeAvg10": 35.0, "bioLatencyP99Ms": 50.0}
    assert cfg.volcano_version == "1.10"
    assert cfg.policy.score_weight == 2.0
    assert cfg.policy.unknown_score == 40
    assert (cfg.host, cfg.port) == ("127.0.0.1", 0)
    assert cfg.report_file == Path("/tmp/r.json")
    assert not cfg.policy.fallback_when_outdated
    assert cfg.notes == ("decoder: ignored: the extender always decodes with msgspec; remove it from the file",)
    assert cfg.max_body_bytes == 2048


@pytest.mark.parametrize(
    ("doc", "names"),
    [
        ({"crStatusTTLSeconds": "30s"}, "crStatusTTLSeconds"),
        ({"crStatusTTLSeconds": 0}, "crStatusTTLSeconds"),
        ({"hardConstraints": {"psiBogus": 1}}, "hardConstraints.psiBogus"),
        ({"hardConstraints": {"psiIoSomeAvg10": "high"}}, "hardConstraints.psiIoSomeAvg10"),
        ({"hardConstraints": [1]}, "hardConstraints"),
        ({"volcanoVersion": "1.8"}, "volcanoVersion"),
        ({"volcanoVersion": "latest"}, "volcanoVersion"),
        ({"mode": "k8s"}, "mode"),
        ({"listen": "9879"}, "listen"),
        ({"listen": ":99999"}, "listen"),
        ({"scoreWeight": -1}, "scoreWeight"),
        ({"unknownScore": 101}, "unknownScore"),
        ({"kataRuntimeClassPrefixes": "kata"}, "kataRuntimeClassPrefixes"),
        ({"fallbackWhenCROutdated": "yes"}, "fallbackWhenCROutdated"),
        ({"maxBodyBytes": 10}, "maxBodyBytes"),
        ({"crname": "x"}, "crname"),
    ],
)
def test_bad_values_name_the_key(doc, names):
    with pytest.raises(ConfigError, match=names.replace(".", r"\.")):
        config_from_mapping(doc, source="extender.yaml")


def test_bad_yaml_and_required_missing_file(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("a: [")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml", required=True)


def test_flags_override_file():
    cfg = with_overrides(
        config_from_mapping({"crStatusTTLSeconds": 10, "listen": ":1"}),
        {"listen": "127.0.0.1:0", "ttl_seconds": 3.0, "volcano_version": "v1.10.0", "mode": None},
    )
    assert (cfg.host, cfg.port, cfg.policy.ttl_seconds, cfg.volcano_version, cfg.mode) == (
        "127.0.0.1",
        0,
        3.0,
        "1.10",
        "standalone",
    )
    with pytest.raises(ConfigError, match="--listen"):
        with_overrides(cfg, {"listen": "nope"})
    with pytest.raises(ConfigError, match="--ttl-seconds"):
        with_overrides(cfg, {"ttl_seconds": 0.0})
    with pytest.raises(ConfigError, match="--score-weight"):
        with_overrides(cfg, {"score_weight": -1.0})


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
    )
    rendered = env.from_string(template.read_text()).render(**values)
    cfg = config_from_mapping(yaml.safe_load(rendered), source="rendered extender.yaml")
    assert cfg.mode == mode
    assert cfg.port == defaults["mco_scheduler_extender_port"]
    assert cfg.policy.ttl_seconds == defaults["mco_scheduler_extender_cr_status_ttl_seconds"]
    assert dict(cfg.policy.hard_constraints) == {
        "psiMemoryFullAvg10": defaults["mco_scheduler_extender_psi_memory_full_avg10"],
        "psiIoSomeAvg10": defaults["mco_scheduler_extender_psi_io_some_avg10_threshold"],
    }
    assert cfg.kubeconfig == ("/etc/mco/extender.kubeconfig" if mode == "cluster" else "")
