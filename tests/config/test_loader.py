"""The one settings loader: layers, key style, old keys, and one error format for all three services."""

from __future__ import annotations

import argparse
import re
import typing
from pathlib import Path

import pytest

from mco_py.collector.biolatency import BACKENDS
from mco_py.config import analyzer, collector, extender
from mco_py.config.collector import BioBackend
from mco_py.config.loader import Spec, add_flags, flag_values, leaves, load, parse_document
from mco_py.errors import ConfigError

SPECS = [collector.SPEC, analyzer.SPEC, extender.SPEC]


def from_argv(spec: Spec[typing.Any], *argv: str, text: str | None = None, env: dict[str, str] | None = None):
    parser = argparse.ArgumentParser()
    add_flags(parser, spec)
    flags, notes = flag_values(parser.parse_args(argv))
    document = parse_document(text, "svc.yaml") if text is not None else None
    return load(spec, document=document, source="svc.yaml", env=env or {}, flags=flags, flag_notes=notes)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.service)
def test_every_setting_has_help_and_one_flag_and_variable_of_its_own(spec: Spec[typing.Any]) -> None:
    all_leaves = leaves(spec.settings)
    assert all(leaf.help for leaf in all_leaves), [leaf.key for leaf in all_leaves if not leaf.help]
    flags = [leaf.flag for leaf in all_leaves]
    variables = [leaf.env(spec.env_prefix) for leaf in all_leaves]
    assert len(set(flags)) == len(flags)
    assert len(set(variables)) == len(variables)
    parser = argparse.ArgumentParser()
    add_flags(parser, spec)  # argparse refuses a flag defined twice (old names included)
    assert parser.parse_args([]) is not None
    shown = parser.format_help()  # `--help` prints every description as written ("80 %" too)
    assert all(leaf.flag in shown for leaf in all_leaves if not leaf.is_mapping)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.service)
def test_the_defaults_load_from_nothing(spec: Spec[typing.Any]) -> None:
    if spec is collector.SPEC:  # a streaming collector needs an address
        assert from_argv(spec, "--stream-analyzers", "a:1").settings.stream.analyzers == ("a:1",)
    else:
        assert from_argv(spec).settings == spec.settings()


def test_file_then_environment_then_flags() -> None:
    text = "stream: {analyzers: [a:1], flushInterval: 1}\ninterval: 2\nlogLevel: debug\n"
    env = {"MCO_COLLECTOR_STREAM_FLUSH_INTERVAL": "3", "MCO_COLLECTOR_INTERVAL": "4"}
    settings = from_argv(collector.SPEC, "--interval", "5", text=text, env=env).settings
    assert (settings.stream.flush_interval, settings.interval, settings.log_level) == (3.0, 5.0, "debug")


def test_node_name_from_the_downward_api_variable_below_its_own() -> None:
    base = ("--no-stream-enabled",)
    assert from_argv(collector.SPEC, *base, env={"NODE_NAME": "a"}).settings.node_name == "a"
    both = {"NODE_NAME": "a", "MCO_COLLECTOR_NODE_NAME": "b"}
    assert from_argv(collector.SPEC, *base, env=both).settings.node_name == "b"


def test_lists_and_booleans_from_text() -> None:
    settings = from_argv(
        collector.SPEC,
        "--stream-analyzers", "a:1,b:2", "--stream-analyzers", "c:3",
        env={"MCO_COLLECTOR_GUARD_RESOURCES": "cpu, io", "MCO_COLLECTOR_STREAM_ENABLED": "yes"},
    ).settings  # fmt: skip
    assert settings.stream.analyzers == ("a:1", "b:2", "c:3")
    assert settings.guard.resources == ("cpu", "io")
    assert settings.stream.enabled is True
    with pytest.raises(
        ConfigError, match=re.escape("environment MCO_COLLECTOR_STREAM_ENABLED: stream.enabled: expected true")
    ):
        from_argv(collector.SPEC, env={"MCO_COLLECTOR_STREAM_ENABLED": "maybe"})
    prefixes = from_argv(extender.SPEC, text="kataRuntimeClassPrefixes: null\n").settings
    assert prefixes.kata_runtime_class_prefixes == ()  # null: none at all


def test_yaml_11_words_are_taken_as_meant() -> None:
    text = "stream: {enabled: no}\nguard: {mode: on}\nonlineCgroups: [a]\nofflineCgroups: [b]\n"
    settings = from_argv(collector.SPEC, text=text).settings
    assert (settings.stream.enabled, settings.guard.mode) == (False, "on")
    assert from_argv(extender.SPEC, text="volcanoVersion: 1.9\n").settings.volcano_reply == "1.9"


def test_every_problem_at_once_each_naming_where_the_key_and_what() -> None:
    with pytest.raises(ConfigError) as caught:
        from_argv(
            collector.SPEC,
            "--metrics-port", "70000",
            text="interval: 0\nstream: {flushInterval: soon, analyzrs: [a:1]}\nbioBackend: magic\n",
            env={"MCO_COLLECTOR_LLC": "maybe", "MCO_COLLECTOR_INTERVALL": "1"},
        )  # fmt: skip
    assert str(caught.value).splitlines() == [
        "6 problems in the collector settings:",
        "svc.yaml: stream.analyzrs: unknown key; did you mean 'analyzers'? (see docs/collector.md#settings)",
        "svc.yaml: interval: expected float >= 0.1, got 0",
        "svc.yaml: stream.flushInterval: expected float, got str 'soon'",
        "svc.yaml: bioBackend: expected one of auto, libbpf, bcc, tracefs, diskstats, off, got 'magic'",
        "environment MCO_COLLECTOR_LLC: llc: expected one of auto, off, got 'maybe'",
        "--metrics-port: metricsPort: expected int <= 65535, got '70000'",
    ]


def test_a_rule_across_keys_names_where_its_key_came_from() -> None:
    with pytest.raises(
        ConfigError, match="^" + re.escape("environment MCO_ANALYZER_TLS_CERT: tlsCert: tlsCert and tlsKey go")
    ):
        from_argv(analyzer.SPEC, env={"MCO_ANALYZER_TLS_CERT": "/c"})
    with pytest.raises(ConfigError, match="^" + re.escape("settings: stream.analyzers: no analyzer address")):
        from_argv(collector.SPEC)


#: What roles/mco_collector rendered up to this release (snake_case, flat), and the same settings now.
OLD_ROLE_FILE = """\
node_name: "w1"
interval_s: 1.0
metrics_host: "0.0.0.0"
metrics_port: 9877
bio_backend: "auto"
log_level: "info"
stream: true
analyzers: ["an-1:9876"]
flush_interval_s: 5.0
guard_journal: "/var/lib/mco-collector/guard-limits.json"
guard: on
guard_interval_s: 1.0
online_cgroups: ["online.slice"]
offline_cgroups: ["offline.slice"]
kubelet_cgroup_driver: "auto"
guard_resources: ["cpu", "memory", "io"]
guard_rules: {"throttle_above": 15, "floor": 0.2}
tls_ca: "/etc/mco/pki/ca.pem"
tls_cert: "/etc/mco/pki/collector.pem"
tls_key: "/etc/mco/pki/collector-key.pem"
"""
NEW_ROLE_FILE = """\
nodeName: "w1"
interval: 1.0
metricsHost: "0.0.0.0"
metricsPort: 9877
bioBackend: "auto"
logLevel: "info"
onlineCgroups: ["online.slice"]
offlineCgroups: ["offline.slice"]
kubeletCgroupDriver: "auto"
stream:
  enabled: true
  analyzers: ["an-1:9876"]
  flushInterval: 5.0
  tlsCa: "/etc/mco/pki/ca.pem"
  tlsCert: "/etc/mco/pki/collector.pem"
  tlsKey: "/etc/mco/pki/collector-key.pem"
guard:
  journal: "/var/lib/mco-collector/guard-limits.json"
  mode: "on"
  interval: 1.0
  resources: ["cpu", "memory", "io"]
  rules: {"throttleAbove": 15, "floor": 0.2}
"""


def test_an_old_file_reads_as_the_new_one_with_one_warning_naming_the_new_keys() -> None:
    old = from_argv(collector.SPEC, text=OLD_ROLE_FILE)
    new = from_argv(collector.SPEC, text=NEW_ROLE_FILE)
    assert old.settings == new.settings
    assert new.notes == ()
    (note,) = old.notes
    assert note.startswith("svc.yaml: old keys read: stream → stream.enabled, guard → guard.mode, node_name → nodeName")
    assert "guard_rules → guard.rules, guard.rules.throttle_above → guard.rules.throttleAbove;" in note
    assert note.endswith("rename them (docs: docs/collector.md#settings)")


def test_a_key_given_old_and_new_is_refused() -> None:
    with pytest.raises(ConfigError, match=re.escape("svc.yaml: interval: given twice, also as the old key interval_s")):
        from_argv(collector.SPEC, "--no-stream-enabled", text="interval_s: 1\ninterval: 2\n")


def test_old_flags_and_variables_still_work_with_a_warning() -> None:
    loaded = from_argv(
        collector.SPEC,
        "--analyzer", "a:1", "--analyzer", "b:2", "--flush-interval", "2", "--tls-ca", "/ca",
        env={"MCO_COLLECTOR_BUFFER_SAMPLES": "7"},
    )  # fmt: skip
    stream = loaded.settings.stream
    assert (stream.analyzers, stream.flush_interval, stream.tls_ca, stream.buffer_samples) == (
        ("a:1", "b:2"),
        2.0,
        Path("/ca"),
        7,
    )
    assert loaded.notes == (
        "--analyzer is now --stream-analyzers; rename it (the old flag is still read)",
        "--analyzer is now --stream-analyzers; rename it (the old flag is still read)",
        "--flush-interval is now --stream-flush-interval; rename it (the old flag is still read)",
        "--tls-ca is now --stream-tls-ca; rename it (the old flag is still read)",
        "environment MCO_COLLECTOR_BUFFER_SAMPLES is now MCO_COLLECTOR_STREAM_BUFFER_SAMPLES; rename it "
        "(the old name is still read)",
    )
    assert from_argv(collector.SPEC, "--no-stream").settings.stream.enabled is False


def test_a_retired_key_is_read_and_named() -> None:
    loaded = from_argv(extender.SPEC, text="decoder: stdlib\n")
    assert loaded.notes == (
        "svc.yaml: decoder: ignored: the extender always decodes with msgspec; remove it from the file",
    )


def test_the_backend_names_are_the_settings_choices() -> None:
    assert typing.get_args(BioBackend) == BACKENDS


def test_the_document_is_read_not_changed() -> None:
    document = {"guard_rules": {"throttle_above": 15}, "stream": False, "interval_s": 2}
    before = repr(document)
    loaded = load(collector.SPEC, document=document, source="svc.yaml")
    assert repr(document) == before
    assert (loaded.settings.guard.rules.throttle_above, loaded.settings.interval) == (15.0, 2.0)


def test_variables_of_others_are_ignored_with_a_warning() -> None:
    """Kubernetes' service links put MCO_ANALYZER_SERVICE_HOST & co. into pods of the namespace."""
    env = {"MCO_ANALYZER_SERVICE_HOST": "10.0.0.1", "MCO_ANALYZER_PORT": "tcp://10.0.0.1:9876",
           "MCO_EXTENDER_HARD_CONSTRAINTS": "x"}  # fmt: skip
    assert from_argv(analyzer.SPEC, env=env).notes == (
        "environment MCO_ANALYZER_SERVICE_HOST: ignored, no analyzer setting has this name; did you mean "
        "MCO_ANALYZER_METRICS_HOST?",
        "environment MCO_ANALYZER_PORT: ignored, no analyzer setting has this name; did you mean "
        "MCO_ANALYZER_REPORT_NAME?",
    )
    assert from_argv(extender.SPEC, env=env).notes == (
        "environment MCO_EXTENDER_HARD_CONSTRAINTS: ignored, hardConstraints is read from the file only",
    )


def test_a_keys_own_variable_wins_over_its_old_name() -> None:
    for env in ({"MCO_COLLECTOR_INTERVAL": "3", "MCO_COLLECTOR_INTERVAL_S": "2"},
                {"MCO_COLLECTOR_INTERVAL_S": "2", "MCO_COLLECTOR_INTERVAL": "3"}):  # fmt: skip
        assert from_argv(collector.SPEC, "--no-stream-enabled", env=env).settings.interval == 3.0


def test_empty_text_is_no_path_and_a_list_may_be_text() -> None:
    text = "stream: {enabled: false, tlsCa: ''}\nbpfDir: ''\nofflineCgroups: 'a.slice, b.slice'\n"
    settings = from_argv(collector.SPEC, env={"MCO_COLLECTOR_STREAM_TOKEN_FILE": ""}, text=text).settings
    assert (settings.stream.tls_ca, settings.stream.token_file, settings.bpf_dir) == (None, None, None)
    assert settings.offline_cgroups == ("a.slice", "b.slice")
    with pytest.raises(ConfigError, match=re.escape("svc.yaml: procRoot: expected a path, got ''")):
        from_argv(collector.SPEC, "--no-stream-enabled", text="procRoot: ''\n")
    assert from_argv(collector.SPEC, "--no-stream-enabled", text="llc: off\n").settings.llc == "off"


def test_a_dotted_name_in_the_file_is_not_a_key() -> None:
    with pytest.raises(ConfigError, match=re.escape("svc.yaml: guard.mode: unknown key; nest it: guard → mode")):
        from_argv(collector.SPEC, "--no-stream-enabled", text="guard.mode: dry-run\n")


def test_strict_reading_takes_values_as_go_does() -> None:
    """mco-plugin's arguments (mco doctor): no text for a number or a boolean, no null for a default."""
    for document, says in (
        ({"crStatusTTLSeconds": "30"}, "crStatusTTLSeconds: expected float, got str '30'"),
        ({"fallbackWhenCROutdated": "true"}, "fallbackWhenCROutdated: expected bool, got str 'true'"),
        ({"crStatusTTLSeconds": None}, "crStatusTTLSeconds: expected a value, got null"),
        ({"hardConstraints": {"psiIoSomeAvg10": "1"}}, "hardConstraints.psiIoSomeAvg10: expected float | null"),
    ):
        with pytest.raises(ConfigError, match=re.escape(f"plugin: {says}")):
            load(extender.SPEC, document=document, source="plugin", strict=True)
        load(extender.SPEC, document=document, source="plugin")  # the extender's own file is lenient
