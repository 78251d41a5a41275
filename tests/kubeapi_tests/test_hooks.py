"""Failure hooks other tests use: injected 5xx, outages, forced conflicts, authentication.

Emulator only: these are the emulator's own hooks (the real kube-apiserver cannot be told to fail
on cue), so nothing here runs in tests/cluster_tests/test_kubeapi_contract.py.
"""

from __future__ import annotations

import socket

import pytest
from kubernetes import client, config

from tests.kubeapi import EmulatedAPI, start
from tests.kubeapi_tests.conftest import raw

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def test_fail_next_answers_the_given_code_for_matching_requests_only(kube_api: EmulatedAPI) -> None:
    kube_api.fail_next(2, path=r"/configmaps$", method="GET", code=503)
    assert raw(kube_api, "GET", "/api/v1/namespaces")[0] == 200
    code, status = raw(kube_api, "GET", CONFIGMAPS)
    assert code == 503
    assert status["reason"] == "ServiceUnavailable"
    assert raw(kube_api, "POST", CONFIGMAPS, {"metadata": {"name": "x"}})[0] == 201  # other method
    assert raw(kube_api, "GET", CONFIGMAPS)[0] == 503
    assert raw(kube_api, "GET", CONFIGMAPS)[0] == 200
    kube_api.fail_next(path="^/version$", code=500)
    code, status = raw(kube_api, "GET", "/version")
    assert code == 500
    assert status["reason"] == "InternalError"
    assert [r.code for r in kube_api.requests][-1] == 500
    assert ("POST", CONFIGMAPS, 201) in [(r.method, r.path, r.code) for r in kube_api.requests]


def test_go_down_refuses_connections_until_up(kube_api: EmulatedAPI, core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "kept"}})
    kube_api.go_down()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((kube_api.host, kube_api.port), timeout=2).close()
    kube_api.go_up()
    assert raw(kube_api, "GET", CONFIGMAPS + "/kept")[0] == 200
    assert core.read_namespaced_config_map("kept", "default").metadata.name == "kept"


def test_conflict_next_write_forces_one_409(kube_api: EmulatedAPI, core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    kube_api.conflict_next_write("configmaps", "c", namespace="default")
    with pytest.raises(client.ApiException) as conflict:
        core.patch_namespaced_config_map("c", "default", {"data": {"a": "1"}})
    assert conflict.value.status == 409
    assert core.patch_namespaced_config_map("c", "default", {"data": {"a": "1"}}).data == {"a": "1"}


def test_token_is_required_when_configured(tmp_path: object) -> None:
    api = start(token="s3cret")
    try:
        code, status = raw(api, "GET", "/api/v1/namespaces")
        assert code == 401
        assert status["reason"] == "Unauthorized"
        kubeconfig = api.write_kubeconfig(f"{tmp_path}/kubeconfig")
        with config.new_client_from_config(str(kubeconfig)) as api_client:
            assert client.CoreV1Api(api_client).list_namespace().items
    finally:
        api.stop()
