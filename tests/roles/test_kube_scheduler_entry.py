"""The extender entry mco_scheduler_extender writes for the cluster's kube-scheduler names an address
a scheduler on the host network reaches (docs/extender.md, "kube-scheduler registration")."""

from __future__ import annotations

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


def test_a_tls_port_gets_an_https_entry_verified_against_mco_pkis_ca() -> None:
    issued = entry(ansible_host="10.0.0.11", mco_scheduler_extender_tls_pki=True)
    assert issued["urlPrefix"] == "https://10.0.0.11:9879/kube"
    assert issued["enableHTTPS"] is True
    assert issued["tlsConfig"] == {"caFile": "/etc/mco/pki/ca.pem"}
    own = entry(
        ansible_host="10.0.0.11",
        mco_scheduler_extender_tls_server_config={"cert_file": "/etc/x/c.pem", "key_file": "/etc/x/k.pem"},
    )
    assert (own["urlPrefix"], own["enableHTTPS"], own["tlsConfig"]) == ("https://10.0.0.11:9879/kube", True, {})
