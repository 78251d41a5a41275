"""The analyzer's file as its role writes it is one the analyzer reads, without old keys."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mco_py.config import analyzer, collector, extender
from mco_py.config.loader import load, parse_document
from mco_py.errors import ConfigError

from .helpers import REPO, render_template


@pytest.mark.parametrize("mode", ["standalone", "cluster"])
def test_the_analyzer_role_writes_what_the_analyzer_reads(tmp_path: Path, mode: str) -> None:
    text = render_template(
        "mco_analyzer",
        "analyzer.yaml.j2",
        tmp_path / "analyzer.yaml",
        {"mco_analyzer_mode": mode, "ansible_host": "10.0.0.5", "inventory_hostname": "ctl-1",
         "mco_insecure_plaintext_grpc": False, "mco_guard_pods": True},
    )  # fmt: skip
    loaded = load(analyzer.SPEC, document=parse_document(text, "analyzer.yaml"), source="analyzer.yaml")
    assert loaded.notes == ()
    settings = loaded.settings
    assert (settings.mode, settings.listen, settings.metrics_port) == (mode, "10.0.0.5:9876", 9878)
    assert (settings.tls_cert, settings.tls_ca) == ("/etc/mco/pki/analyzer.pem", "/etc/mco/pki/ca.pem")
    assert settings.guard_pods is (mode == "cluster")
    assert settings.kubeconfig == ("/var/lib/mco/credentials/analyzer.kubeconfig" if mode == "cluster" else "")
    assert settings.namespace == "mco-system"


def test_the_analyzer_follows_the_namespace_mco_crds_installs_into(tmp_path: Path) -> None:
    text = render_template(
        "mco_analyzer",
        "analyzer.yaml.j2",
        tmp_path / "analyzer.yaml",
        {"mco_analyzer_mode": "cluster", "mco_crds_namespace": "platform-mco", "mco_insecure_plaintext_grpc": False,
         "mco_guard_pods": True},
    )  # fmt: skip
    settings = load(analyzer.SPEC, document=parse_document(text, "analyzer.yaml"), source="analyzer.yaml").settings
    assert settings.namespace == "platform-mco"


@pytest.mark.parametrize(("role", "unit"), [("mco_analyzer", "analyzer"), ("mco_scheduler_extender", "extender")])
@pytest.mark.parametrize("mode", ["standalone", "cluster"])
def test_in_cluster_mode_the_service_may_rewrite_its_kubeconfig_and_nothing_else_of_etc(
    tmp_path: Path, role: str, unit: str, mode: str
) -> None:
    """It renews its ServiceAccount token and writes the kubeconfig back (mco_py/kube/token.py)."""
    text = render_template(
        role,
        f"mco-{unit}.service.j2",
        tmp_path / f"mco-{unit}.service",
        {f"{role}_mode": mode, "ansible_host": "10.0.0.5", "inventory_hostname": "ctl-1",
         "mco_insecure_plaintext_grpc": False},
    )  # fmt: skip
    writable = [line.partition("=")[2] for line in text.splitlines() if line.startswith("ReadWritePaths=")]
    assert "ProtectSystem=strict" in text
    assert ("/var/lib/mco/credentials" in writable) == (mode == "cluster")
    assert not any(path.startswith("/etc") for path in writable)


@pytest.mark.parametrize(("role", "unit"), [("mco_analyzer", "analyzer"), ("mco_scheduler_extender", "extender")])
@pytest.mark.parametrize("kubeconfig", ["/etc/mco/analyzer.kubeconfig", "/etc/kubernetes/mco.kubeconfig"])
def test_a_kubeconfig_outside_mcos_credentials_directory_leaves_its_directory_read_only(
    tmp_path: Path, role: str, unit: str, kubeconfig: str
) -> None:
    """The operator's directory is not MCO's: the unit may not write it (the token is renewed in memory)."""
    text = render_template(
        role,
        f"mco-{unit}.service.j2",
        tmp_path / f"mco-{unit}.service",
        {f"{role}_mode": "cluster", f"{role}_kubeconfig": kubeconfig, "ansible_host": "10.0.0.5",
         "inventory_hostname": "ctl-1", "mco_insecure_plaintext_grpc": False},
    )  # fmt: skip
    writable = [line.partition("=")[2] for line in text.splitlines() if line.startswith("ReadWritePaths=")]
    assert not any(path.startswith("/etc") for path in writable)
    assert "/var/lib/mco/credentials" not in writable


@pytest.mark.parametrize("role", ["mco_analyzer", "mco_scheduler_extender"])
def test_the_role_owns_and_locks_only_mcos_credentials_directory(role: str) -> None:
    """No task chowns or chmods the kubeconfig's directory (an operator's /etc/kubernetes stays as it is):
    the only directory the role makes the service user's is state_dir/credentials, and only when the
    kubeconfig is in it."""
    tasks = yaml.safe_load((REPO / "roles" / role / "tasks/configure.yml").read_text())
    short = role.removeprefix("mco_")
    files = [task for task in tasks if "ansible.builtin.file" in task]
    for task in files:
        if task["ansible.builtin.file"].get("state") != "absent":
            assert "kubeconfig" not in task["ansible.builtin.file"]["path"], task["name"]
    (credentials,) = [
        task
        for task in files
        if "credentials" in task["ansible.builtin.file"]["path"]
        and task["ansible.builtin.file"].get("state") != "absent"
    ]
    assert credentials["ansible.builtin.file"]["path"] == f"{{{{ __mco_{short}_credentials_dir }}}}"
    assert (credentials["ansible.builtin.file"]["owner"], credentials["ansible.builtin.file"]["mode"]) == (
        "{{ mco_common_setup.user }}",
        "0700",
    )
    assert f"__mco_{short}_kubeconfig_in_credentials_dir" in credentials["when"]
    internal = yaml.safe_load((REPO / "roles" / role / "vars/main.yml").read_text())
    assert internal[f"__mco_{short}_credentials_dir"] == "{{ mco_common_setup.state_dir }}/credentials"


@pytest.mark.parametrize("renewal", [True, False])
def test_with_host_renewal_the_analyzer_renews_in_its_credentials_directory_with_its_signing_ca(
    tmp_path: Path, renewal: bool
) -> None:
    common = {"ansible_host": "10.0.0.5", "inventory_hostname": "ctl-1", "mco_insecure_plaintext_grpc": False,
              "__mco_analyzer_renewal": renewal, "mco_metrics_tls_pki": True}  # fmt: skip
    text = render_template("mco_analyzer", "analyzer.yaml.j2", tmp_path / "analyzer.yaml", common)
    loaded = load(analyzer.SPEC, document=parse_document(text, "analyzer.yaml"), source="analyzer.yaml")
    settings = loaded.settings
    where = "/var/lib/mco/credentials" if renewal else "/etc/mco/pki"
    assert (settings.tls_cert, settings.tls_key) == (f"{where}/analyzer.pem", f"{where}/analyzer-key.pem")
    assert str(settings.metrics_web.tls.cert_file) == f"{where}/analyzer-metrics.pem"
    assert settings.tls_ca == "/etc/mco/pki/ca.pem"  # the trust bundle stays root's
    assert (settings.tls_signer_cert, settings.tls_signer_key) == (
        ("/var/lib/mco/credentials/signer.pem", "/var/lib/mco/credentials/signer-key.pem") if renewal else ("", "")
    )
    assert settings.cert_term == 365 * 86400
    unit = render_template("mco_analyzer", "mco-analyzer.service.j2", tmp_path / "mco-analyzer.service", common)
    writable = [line.partition("=")[2] for line in unit.splitlines() if line.startswith("ReadWritePaths=")]
    assert ("/var/lib/mco/credentials" in writable) == renewal
    assert not any(path.startswith("/etc") for path in writable)


@pytest.mark.parametrize(("renewal", "own"), [(True, False), (False, False), (True, True)])
def test_the_collector_renews_mco_pkis_certificate_in_its_state_directory(
    tmp_path: Path, renewal: bool, own: bool
) -> None:
    variables: dict[str, object] = {
        "mco_collector_analyzer_addrs": ["ctl-1:9876"], "mco_insecure_plaintext_grpc": False,
        "__mco_collector_renewal": renewal, "mco_collector_node_name": "node-1",
    }  # fmt: skip
    if own:  # the operator's own files: theirs to renew
        variables |= {"mco_collector_tls_ca": "/etc/ssl/mco/ca.pem", "mco_collector_tls_cert": "/etc/ssl/mco/c.pem",
                      "mco_collector_tls_key": "/etc/ssl/mco/c-key.pem"}  # fmt: skip
    text = render_template("mco_collector", "collector.yaml.j2", tmp_path / "collector.yaml", variables)
    loaded = load(collector.SPEC, document=parse_document(text, "collector.yaml"), source="collector.yaml")
    stream = loaded.settings.stream
    assert stream.cert_renewal is (renewal and not own)
    if own:
        assert str(stream.tls_cert) == "/etc/ssl/mco/c.pem"
    else:
        where = "/var/lib/mco-collector" if renewal else "/etc/mco/pki"
        assert (str(stream.tls_cert), str(stream.tls_key)) == (f"{where}/collector.pem", f"{where}/collector-key.pem")
        assert str(stream.tls_ca) == "/etc/mco/pki/ca.pem"


def test_the_extender_never_reads_the_control_hosts_signing_ca_key(tmp_path: Path) -> None:
    common = {"ansible_host": "10.0.0.5", "inventory_hostname": "ctl-1", "mco_scheduler_extender_tls_pki": True}
    text = render_template("mco_scheduler_extender", "extender.yaml.j2", tmp_path / "extender.yaml", common)
    assert "signer" not in text.lower()
    settings = load(extender.SPEC, document=parse_document(text, "extender.yaml"), source="extender.yaml").settings
    assert (str(settings.web.tls.cert_file), str(settings.web.tls.key_file)) == (
        "/etc/mco/pki/extender.pem",
        "/etc/mco/pki/extender-key.pem",
    )
    # the analyzer's signing key sits in the same user's credentials directory: hidden from the extender's unit
    unit = render_template(
        "mco_scheduler_extender", "mco-extender.service.j2", tmp_path / "mco-extender.service", common
    )
    assert "InaccessiblePaths=-/var/lib/mco/credentials/signer-key.pem" in unit.splitlines()
    # and it has no setting that would load one
    with pytest.raises(ConfigError, match="tlsSignerKey"):
        load(extender.SPEC, document=parse_document("tlsSignerKey: /k.pem\n", "extender.yaml"), source="extender.yaml")
