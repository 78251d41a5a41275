"""Clients for the emulated API: the real kubernetes package, typed and dynamic."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, dynamic

from tests.kubeapi import EmulatedAPI

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "mco_py" / "data" / "crds" / "nodeinterferencereports.yaml"
SAMPLE_REPORT = ROOT / "tests" / "contracts" / "sample_report.json"


@pytest.fixture
def api_client(kubeconfig: Path) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(str(kubeconfig))
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def dyn(api_client: client.ApiClient, tmp_path: Path) -> dynamic.DynamicClient:
    # Own discovery cache file: the default one in /tmp is keyed by URL and would outlive the server.
    return dynamic.DynamicClient(api_client, cache_file=str(tmp_path / "discovery.json"))


def mco_crd() -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
    return crd


def sample_report() -> dict[str, Any]:
    report: dict[str, Any] = json.loads(SAMPLE_REPORT.read_text())
    return report


def body(exc: client.ApiException) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(exc.body)
    return decoded


def raw(
    api: EmulatedAPI, method: str, path: str, payload: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """One plain HTTP request to the emulated server; returns (status, decoded JSON or text)."""
    conn = http.client.HTTPConnection(api.host, api.port, timeout=10)
    try:
        data = None if payload is None else (payload if isinstance(payload, bytes) else json.dumps(payload).encode())
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        text = response.read().decode()
        try:
            return response.status, json.loads(text)
        except ValueError:
            return response.status, text
    finally:
        conn.close()
