"""Emulated Kubernetes API server for tests (not shipped): see server.py and docs/testing-kubeapi.md."""

from tests.kubeapi.server import EmulatedAPI, RequestRecord, start

__all__ = ["EmulatedAPI", "RequestRecord", "start"]
