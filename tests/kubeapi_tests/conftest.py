"""Clients for the contract tests: the real kubernetes package, typed and dynamic, on a backend.

A contract test asks for ``backend`` (or the clients built on it: ``api_client``, ``core``,
``dyn``, and ``ns`` for its namespace) and then runs against the emulated API here and against
the real kube-apiserver in ``tests/cluster_tests/test_kubeapi_contract.py`` (the ``cluster``
tier), which overrides ``backend``. A test that asks for ``kube_api`` uses what only the
emulator has (failure hooks, ``requests``, ``store``, tunable history and bookmarks) and runs
against the emulator only.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kubernetes import client, config, dynamic
from kubernetes.dynamic.exceptions import ResourceNotFoundError
from kubernetes.dynamic.resource import Resource

from tests.kubeapi import EmulatedAPI

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "mco_py" / "data" / "crds" / "nodeinterferencereports.yaml"
SAMPLE_REPORT = ROOT / "tests" / "contracts" / "sample_report.json"
T = TypeVar("T")


@dataclass
class Backend:
    """The API server a contract test talks to: ``emulated`` (tests/kubeapi) or ``real`` (kube-apiserver)."""

    name: str
    kubeconfig: Path
    host: str
    port: int
    namespace: str
    """Namespace of the test's namespaced objects: ``default`` on a fresh emulated server, a fresh
    namespace of its own on the real server (which the tests of a module share)."""
    ssl_context: ssl.SSLContext | None = None


@pytest.fixture
def backend(kube_api: EmulatedAPI, kubeconfig: Path) -> Backend:
    """The emulated API (a fresh server per test)."""
    return Backend("emulated", kubeconfig, kube_api.host, kube_api.port, "default")


@pytest.fixture
def ns(backend: Backend) -> str:
    return backend.namespace


@pytest.fixture
def api_client(backend: Backend) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(str(backend.kubeconfig))
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


def eventually(check: Callable[[], T], timeout: float = 30.0) -> T:
    """``check()``'s result once it stops raising AssertionError (or the last error after ``timeout``).

    For what the real server finishes asynchronously (a CRD becoming Established and discoverable,
    a namespace or CRD going away); the emulated server is done at once, so the first call passes.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def served(dyn: dynamic.DynamicClient, api_version: str, kind: str) -> Resource:
    """The resource of a just created CRD, once it is Established and in discovery."""

    def find() -> Resource:
        try:
            resource: Resource = dyn.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError as exc:
            dyn.resources.invalidate_cache()
            raise AssertionError(f"{kind} not discoverable yet") from exc
        return resource

    return eventually(find)


def raw(
    target: EmulatedAPI | Backend,
    method: str,
    path: str,
    payload: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """One plain HTTP request to the server; returns (status, decoded JSON or text)."""
    context = getattr(target, "ssl_context", None)
    conn: http.client.HTTPConnection
    if context is not None:
        conn = http.client.HTTPSConnection(target.host, target.port, timeout=10, context=context)
    else:
        conn = http.client.HTTPConnection(target.host, target.port, timeout=10)
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
