"""The analyzer's file as its role writes it is one the analyzer reads, without old keys."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mco_py.config import analyzer
from mco_py.config.loader import load, parse_document

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
    (credentials,) = [task for task in files if "credentials" in task["ansible.builtin.file"]["path"]]
    assert credentials["ansible.builtin.file"]["path"] == f"{{{{ __mco_{short}_credentials_dir }}}}"
    assert (credentials["ansible.builtin.file"]["owner"], credentials["ansible.builtin.file"]["mode"]) == (
        "{{ mco_common_setup.user }}",
        "0700",
    )
    assert f"__mco_{short}_kubeconfig_in_credentials_dir" in credentials["when"]
    internal = yaml.safe_load((REPO / "roles" / role / "vars/main.yml").read_text())
    assert internal[f"__mco_{short}_credentials_dir"] == "{{ mco_common_setup.state_dir }}/credentials"
