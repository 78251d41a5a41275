"""Kubeconfigs the doctor tests point ``mco doctor --cluster`` at."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.cluster.cluster import free_port


def unreachable_kubeconfig(path: Path) -> Path:
    """A kubeconfig at ``path`` naming an API server on a free loopback port (nothing answers)."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{free_port()}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path
