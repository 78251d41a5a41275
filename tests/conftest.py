"""Shared fixtures: a running emulated Kubernetes API server (tests/kubeapi) and its kubeconfig."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.kubeapi import EmulatedAPI, start

# Property tests check results, never speed: no per-example deadline (a busy CI host
# turned the 200 ms default into "Flaky" failures), no "too slow" health check, and
# no example database written into the checkout. Examples stay random; a failure
# prints the seed to reproduce it (`--hypothesis-seed=N`).
settings.register_profile(
    "mco",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
    print_blob=True,
)
settings.load_profile("mco")


@pytest.fixture
def kube_api() -> Iterator[EmulatedAPI]:
    """A fresh emulated API server on 127.0.0.1, port 0; stopped after the test."""
    api = start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture
def kubeconfig(kube_api: EmulatedAPI, tmp_path: Path) -> Path:
    """Path of a kubeconfig pointing at ``kube_api`` (namespace ``default``)."""
    return kube_api.write_kubeconfig(tmp_path / "kubeconfig")
