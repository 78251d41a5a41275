"""The extender entry mco_scheduler_extender writes for the cluster's kube-scheduler names an address
a scheduler on the host network reaches (docs/extender.md, "kube-scheduler registration")."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.docs.examples import render_kube_scheduler_entry


def entry(**variables: Any) -> dict[str, Any]:
    (only,) = yaml.safe_load(render_kube_scheduler_entry({"mco_mode": "cluster", **variables}))["extenders"]
    assert isinstance(only, dict)
    return only


@pytest.mark.parametrize(
    ("variables", "url"),
    [
        ({"ansible_host": "10.0.0.11"}, "http://10.0.0.11:9879/kube"),
        ({"ansible_host": "ctl-1.example.org", "mco_scheduler_extender_port": 19879}, "http://ctl-1.example.org:19879/kube"),
        ({"ansible_host": "10.0.0.11", "mco_scheduler_extender_listen_host": "192.168.7.2"}, "http://192.168.7.2:9879/kube"),
        ({"ansible_host": "10.0.0.11", "mco_scheduler_extender_listen_host": "0.0.0.0"}, "http://10.0.0.11:9879/kube"),
        ({"ansible_host": "10.0.0.11", "mco_scheduler_extender_kube_scheduler_address": "10.96.0.42"},
         "http://10.96.0.42:9879/kube"),
        ({"ansible_host": "fd00::11"}, "http://[fd00::11]:9879/kube"),
    ],
)  # fmt: skip
def test_the_url_is_an_address_never_a_service_name(variables: dict[str, Any], url: str) -> None:
    got = entry(**variables)
    assert got["urlPrefix"] == url
    assert ".svc" not in got["urlPrefix"]


def test_the_entry_is_what_kube_scheduler_takes_and_ignorable_is_the_inventorys() -> None:
    default = entry(ansible_host="10.0.0.11")
    assert default == {
        "urlPrefix": "http://10.0.0.11:9879/kube",
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "weight": 1,
        "nodeCacheCapable": True,
        "ignorable": True,
        "httpTimeout": "1s",
    }
    assert entry(ansible_host="h", mco_scheduler_extender_kube_scheduler_ignorable=False)["ignorable"] is False
    assert entry(ansible_host="h", mco_mode="standalone")["nodeCacheCapable"] is False


def test_a_tls_port_gets_an_https_entry_verified_against_mco_pkis_ca_inline(tmp_path: Path) -> None:
    """caData, never a caFile: a path on the extender's host is absent from a kubeadm static kube-scheduler
    pod, and a missing caFile stops kube-scheduler."""
    ca = tmp_path / "ca-bundle.pem"
    pem = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUfake\n-----END CERTIFICATE-----\n"
    ca.write_text(pem)
    issued = entry(
        ansible_host="10.0.0.11",
        mco_scheduler_extender_tls_pki=True,
        mco_pki_files={"ca": str(ca), "pending": False},
    )
    assert issued["urlPrefix"] == "https://10.0.0.11:9879/kube"
    assert issued["enableHTTPS"] is True
    assert issued["tlsConfig"] == {"caData": base64.b64encode(pem.encode()).decode()}
    own = entry(
        ansible_host="10.0.0.11",
        mco_scheduler_extender_tls_server_config={"cert_file": "/etc/x/c.pem", "key_file": "/etc/x/k.pem"},
    )
    assert (own["urlPrefix"], own["enableHTTPS"], own["tlsConfig"]) == ("https://10.0.0.11:9879/kube", True, {})


@pytest.mark.parametrize(
    ("variables", "names"),
    [
        ({"mco_scheduler_extender_basic_auth_users": {"kube-scheduler": "$2y$10$abc"}}, ["USER:PASSWORD", "urlPrefix"]),
        ({"mco_scheduler_extender_tls_server_config": {"cert_file": "/c.pem", "key_file": "/k.pem",
          "client_auth_type": "RequireAndVerifyClientCert", "client_ca_file": "/ca.pem"}},
         ["tlsConfig.certFile", "tlsConfig.keyFile"]),
    ],
)  # fmt: skip
def test_an_entry_without_the_credentials_the_port_asks_for_says_so_loudly(
    variables: dict[str, Any], names: list[str]
) -> None:
    text = render_kube_scheduler_entry({"mco_mode": "cluster", "ansible_host": "10.0.0.11", **variables})
    loud = [line for line in text.splitlines() if "!!!" in line]
    assert "CREDENTIALS MISSING" in loud[0]
    for name in names:
        assert name in "\n".join(loud)
    assert "!!!" not in render_kube_scheduler_entry({"mco_mode": "cluster", "ansible_host": "10.0.0.11"})
