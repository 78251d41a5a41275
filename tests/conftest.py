"""Shared fixtures: a running emulated Kubernetes API server (tests/kubeapi) and its kubeconfig."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kubeapi import EmulatedAPI, start


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
