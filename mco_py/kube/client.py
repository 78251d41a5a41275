"""Kubernetes client wiring: the only place that loads kube configuration.

Every other Kubernetes adapter takes the ``ApiClient`` this returns, so tests
point the whole stack at the emulated API server with one kubeconfig path.
"""

from __future__ import annotations

import os
from pathlib import Path

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import HTTPError

from mco_py.errors import ConfigError, MCOError, StoreUnavailable, error_for_status


def load_api_client(kubeconfig: str | Path | None = None, *, context: str | None = None) -> client.ApiClient:
    """An ``ApiClient`` from the first source that is set, in kubectl's order.

    ``kubeconfig`` (a flag or config field), else ``$KUBECONFIG`` (one file or a ``:`` list),
    else the in-cluster ServiceAccount (``KUBERNETES_SERVICE_HOST``), else ``~/.kube/config``.
    Raises :class:`ConfigError` saying which sources were tried and what was wrong.
    """
    configuration = client.Configuration()
    if kubeconfig:
        path = Path(kubeconfig)
        if not path.is_file():
            raise ConfigError(f"kubeconfig {path} does not exist; pass an existing file or leave it empty")
        try:
            config.load_kube_config(config_file=str(path), context=context, client_configuration=configuration)
        except (ConfigException, OSError, ValueError) as exc:
            raise ConfigError(f"kubeconfig {path} is not usable: {exc}") from exc
        return client.ApiClient(configuration)
    env = os.environ.get("KUBECONFIG", "")
    if env:
        try:
            # the kubernetes package reads $KUBECONFIG once, at import: pass today's (a ':' list too)
            config.load_kube_config(config_file=env, context=context, client_configuration=configuration)
        except (ConfigException, OSError, ValueError) as exc:
            raise ConfigError(f"$KUBECONFIG={env} is not usable: {exc}; fix it, or unset it") from exc
        return client.ApiClient(configuration)
    tried: list[str] = []
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            config.load_incluster_config(client_configuration=configuration)
            return client.ApiClient(configuration)
        except ConfigException as exc:
            tried.append(f"in-cluster ({exc})")
    try:
        config.load_kube_config(context=context, client_configuration=configuration)
        return client.ApiClient(configuration)
    except (ConfigException, OSError, ValueError) as exc:
        tried.append(f"~/.kube/config ({exc})")
    raise ConfigError("no Kubernetes configuration found; tried " + "; ".join(tried) + ". Set --kubeconfig.")


def translate(exc: Exception, *, what: str) -> MCOError:
    """Map a client exception to the MCO error a caller can act on (raise it ``from exc``)."""
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        return error_for_status(status, f"{what}: HTTP {status} {exc.reason or ''}".strip())
    if isinstance(exc, HTTPError | OSError):
        return StoreUnavailable(f"{what}: API server unreachable: {exc}")
    return MCOError(f"{what}: {exc}")
