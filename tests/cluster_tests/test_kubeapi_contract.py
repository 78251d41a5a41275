"""The contract tests of tests/kubeapi_tests against the real kube-apiserver (``cluster`` tier).

Every test function there that asks for a server through ``backend`` (directly or by ``api_client``,
``core``, ``dyn``, ``ns``, ``nir``) and not for ``kube_api`` (the emulator's own hooks) is
collected here once more, with ``backend`` overridden to the real server: one RealCluster per
module (etcd, kube-apiserver, and kube-controller-manager running only the namespace controller, so
namespace deletion finishes), a fresh namespace per test, and every CRD deleted after each test.
The test bodies are the same; differences the real server showed are listed in
docs/testing-kubeapi.md ("Checked against the real kube-apiserver").
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import pkgutil
import re
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kubernetes import client, config

import tests.kubeapi_tests
from tests.cluster.cluster import RealCluster
from tests.kubeapi_tests.conftest import Backend, api_client, core, dyn, ns  # noqa: F401 - fixtures
from tests.kubeapi_tests.test_crd import nir  # noqa: F401 - fixture

pytestmark = pytest.mark.cluster

#: Fixtures that reach the server through ``backend``.
SERVER_FIXTURES = {"backend", "api_client", "core", "dyn", "ns", "nir"}
_counter = itertools.count(1)


def contract_tests(*modules: ModuleType) -> dict[str, Callable[..., Any]]:
    """The test functions of ``modules`` that run on any backend (see module docstring)."""
    found: dict[str, Callable[..., Any]] = {}
    for module in modules:
        for name, fn in vars(module).items():
            if not name.startswith("test_") or not inspect.isfunction(fn):
                continue
            params = set(inspect.signature(fn).parameters)
            if params & SERVER_FIXTURES and "kube_api" not in params:
                assert name not in found, f"two contract tests are named {name}"
                found[name] = fn
    return found


MODULES = [
    importlib.import_module(f"tests.kubeapi_tests.{m.name}")
    for m in pkgutil.iter_modules(tests.kubeapi_tests.__path__)
    if m.name.startswith("test_")
]
globals().update(contract_tests(*MODULES))


@pytest.fixture(scope="module")
def real_cluster(cluster_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    cluster = RealCluster(tmp_path_factory.mktemp("kubeapi-contract"), cluster_binaries)
    started = time.monotonic()
    cluster.start(nodes=0, controllers=["namespace"])
    print(f"real control plane for the contract tests started in {time.monotonic() - started:.1f} s")
    try:
        yield cluster
    finally:
        cluster.stop()


def _admin_context(cluster: RealCluster) -> ssl.SSLContext:
    assert cluster.ca is not None
    context = ssl.create_default_context(cafile=str(cluster.ca.path))
    context.load_cert_chain(str(cluster.admin.cert), str(cluster.admin.key))
    return context


def _delete_all_crds(kubeconfig: Path, timeout: float = 60.0) -> None:
    """Delete every CRD and wait until they are gone (their objects go first, by the CRD finalizer)."""
    with config.new_client_from_config(str(kubeconfig)) as api:
        ext = client.ApiextensionsV1Api(api)
        for crd in ext.list_custom_resource_definition().items:
            ext.delete_custom_resource_definition(crd.metadata.name)
        deadline = time.monotonic() + timeout
        while ext.list_custom_resource_definition().items:
            if time.monotonic() > deadline:
                raise AssertionError(f"CRDs still there after {timeout:.0f} s")
            time.sleep(0.1)


@pytest.fixture
def backend(real_cluster: RealCluster, request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The real kube-apiserver of this module, with a namespace of the test's own."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower().removeprefix("test_"))
    namespace = f"t{next(_counter)}-{slug}"[:63].strip("-")
    kubeconfig = real_cluster.admin_kubeconfig
    with config.new_client_from_config(str(kubeconfig)) as api:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    try:
        yield Backend("real", kubeconfig, "127.0.0.1", real_cluster.api_port, namespace, _admin_context(real_cluster))
    finally:
        _delete_all_crds(kubeconfig)
