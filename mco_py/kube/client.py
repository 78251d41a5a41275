"""Kubernetes client wiring: the only place that loads kube configuration.

Every other Kubernetes adapter takes the ``ApiClient`` this returns, so tests
point the whole stack at the emulated API server with one kubeconfig path.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import HTTPError

from mco_py.errors import ConfigError, MCOError, StoreUnavailable, error_for_status
from mco_py.kube.source import KUBECONFIG_SEPARATOR, KubeSource, current_context, find_kube_source


def connect(source: KubeSource, *, context: str | None = None) -> tuple[client.ApiClient, str]:
    """An ``ApiClient`` from ``source`` and a line saying which configuration (and context) it uses.
    Raises :class:`ConfigError` saying what is wrong and how to fix it."""
    configuration = client.Configuration()
    if source.origin == "in-cluster":
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException as exc:
            raise ConfigError(
                f"in-cluster configuration (KUBERNETES_SERVICE_HOST is set) is not usable: {exc}; "
                "pass --kubeconfig, or run where the pod's ServiceAccount token is mounted"
            ) from exc
        return client.ApiClient(configuration), "the in-cluster ServiceAccount"
    if source.origin == "--kubeconfig":
        where, fix = f"kubeconfig {source.files[0]}", "pass an existing file or leave it empty"
    elif source.origin == "$KUBECONFIG":
        where, fix = f"$KUBECONFIG={KUBECONFIG_SEPARATOR.join(map(str, source.files))}", "fix it, or unset it"
    else:
        where, fix = f"{source.origin} ({source.files[0]})", "fix it, or pass --kubeconfig"
    present = [path for path in source.files if path.is_file()]
    if not present:
        names = "does not exist" if len(source.files) == 1 else "names no existing file"
        raise ConfigError(f"{where} {names}; {fix}")
    chosen = context or current_context(present) or None
    try:
        config.load_kube_config(
            config_file=KUBECONFIG_SEPARATOR.join(map(str, present)),
            context=chosen,
            client_configuration=configuration,
        )
    except (ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{where} is not usable: {exc}; {fix}") from exc
    return client.ApiClient(configuration), f"{where}, context {chosen or '(none)'}"


def load_api_client(
    kubeconfig: str | Path | None = None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> client.ApiClient:
    """An ``ApiClient`` from the first source :func:`find_kube_source` finds (kubectl's order).
    Raises :class:`ConfigError` when there is none or it is not usable."""
    source = find_kube_source(
        kubeconfig, environ=os.environ if environ is None else environ, home=Path.home() if home is None else home
    )
    if source is None:
        raise ConfigError(
            "no Kubernetes configuration found: no kubeconfig given, $KUBECONFIG unset, no ~/.kube/config, "
            "not in a pod (KUBERNETES_SERVICE_HOST unset). Set --kubeconfig."
        )
    return connect(source, context=context)[0]


def translate(exc: Exception, *, what: str) -> MCOError:
    """Map a client exception to the MCO error a caller can act on (raise it ``from exc``)."""
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        return error_for_status(status, f"{what}: HTTP {status} {exc.reason or ''}".strip())
    if isinstance(exc, HTTPError | OSError):
        return StoreUnavailable(f"{what}: API server unreachable: {exc}")
    return MCOError(f"{what}: {exc}")
