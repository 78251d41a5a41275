"""Which Kubernetes configuration to use, in kubectl's order, decided without loading the client
(``mco report`` on a host falls back to its report file without importing it)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

#: What ``$KUBECONFIG`` separates its files with (kubectl's rule: ``:``, ``;`` on Windows).
KUBECONFIG_SEPARATOR = os.pathsep


@dataclass(frozen=True, slots=True)
class KubeSource:
    """Where a Kubernetes client's configuration comes from (:func:`find_kube_source`)."""

    origin: str
    """``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config`` or ``in-cluster``."""
    files: tuple[Path, ...] = ()
    """The kubeconfig files, in kubectl's order (empty in-cluster)."""


def find_kube_source(kubeconfig: str | Path | None, *, environ: Mapping[str, str], home: Path) -> KubeSource | None:
    """kubectl's order: ``kubeconfig`` (a flag or config field), else ``$KUBECONFIG`` (one file or a
    ``:`` list; :func:`mco_py.kube.client.connect` leaves out those that do not exist, as kubectl
    does), else ``home``'s
    ``.kube/config`` when it exists, else the in-cluster ServiceAccount
    (``KUBERNETES_SERVICE_HOST``); None when none of them is set."""
    if kubeconfig:
        return KubeSource("--kubeconfig", (Path(kubeconfig),))
    env = environ.get("KUBECONFIG", "")
    if env:
        return KubeSource("$KUBECONFIG", tuple(Path(p).expanduser() for p in env.split(KUBECONFIG_SEPARATOR) if p))
    default = home / ".kube" / "config"
    if default.is_file():
        return KubeSource("~/.kube/config", (default,))
    if environ.get("KUBERNETES_SERVICE_HOST"):
        return KubeSource("in-cluster")
    return None


def current_context(files: Sequence[Path]) -> str:
    """The context kubectl uses for ``files``: the first ``current-context`` set among them."""
    for path in files:
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue  # loading the configuration says what is wrong with the file
        if isinstance(document, dict) and document.get("current-context"):
            return str(document["current-context"])
    return ""
