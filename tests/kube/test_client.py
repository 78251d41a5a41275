"""Kubernetes client wiring and error translation."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from mco_py.errors import ConfigError, ReportConflict, ReportNotFound, StoreUnavailable
from mco_py.kube.client import load_api_client, translate


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{token: t0k}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""
    )
    return path


def test_loads_the_given_kubeconfig(tmp_path: Path) -> None:
    api = load_api_client(_kubeconfig(tmp_path / "kc", "http://127.0.0.1:6443"))
    assert api.configuration.host == "http://127.0.0.1:6443"
    assert "Bearer t0k" in api.configuration.api_key.values()


def test_missing_and_broken_kubeconfig_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_api_client(tmp_path / "nope")
    bad = tmp_path / "bad"
    bad.write_text("just: [a, list]\n")
    with pytest.raises(ConfigError, match="not usable"):
        load_api_client(bad)


@pytest.mark.parametrize(
    ("status", "kind"), [(404, ReportNotFound), (409, ReportConflict), (500, StoreUnavailable), (403, StoreUnavailable)]
)
def test_translate_api_status(status: int, kind: type[Exception]) -> None:
    err = translate(ApiException(status=status, reason="x"), what="write nir/cluster")
    assert isinstance(err, kind)
    assert f"HTTP {status}" in str(err)


def test_unreachable_server_is_store_unavailable(tmp_path: Path) -> None:
    api = load_api_client(_kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{_free_port()}"))
    api.configuration.retries = 0
    core = client.CoreV1Api(api)
    with pytest.raises(Exception) as info:  # noqa: PT011 - any library error; translate() classifies it
        core.list_node(_request_timeout=2)
    assert isinstance(translate(info.value, what="list nodes"), StoreUnavailable)
