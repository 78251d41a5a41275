#!/usr/bin/python
# Copyright: Many-Core Orchestrator authors
# Mulan PSL v2 (see LICENSE)
"""A kubeconfig for one ServiceAccount, with a bounded token from the TokenRequest API."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mco_sa_kubeconfig
short_description: Write a kubeconfig holding a bounded token of one ServiceAccount
description:
  - Asks the API server named by O(kubeconfig) (the operator's) for a token of
    ServiceAccount O(namespace)/O(service_account) through the TokenRequest API
    (C(POST .../serviceaccounts/NAME/token)), valid for O(expiration_seconds) or
    less if the server caps it.
  - Writes a kubeconfig with the same server and CA and only that token into
    O(dest_dir) (mode 0600), named after the account and the server, and returns its path.
  - Keeps the file (no request) while its token belongs to that account (the same UID; a
    ServiceAccount deleted and made again, as by an uninstall and a new install, invalidates
    its old tokens) and server and has more than a third of O(expiration_seconds) left,
    unless O(renew).
  - Never returns the token.
version_added: "0.1.0"
author: Many-Core Orchestrator authors
options:
  kubeconfig:
    description: The operator's kubeconfig (it may create tokens for the account).
    type: path
    required: true
  namespace:
    description: Namespace of the ServiceAccount.
    type: str
    required: true
  service_account:
    description: Name of the ServiceAccount.
    type: str
    required: true
  expiration_seconds:
    description: Requested token lifetime (at least 600).
    type: int
    default: 7776000
  dest_dir:
    description: Directory the kubeconfig is written into (created mode 0700).
    type: path
    required: true
  renew:
    description: Request a new token even if the current one is good.
    type: bool
    default: false
  server:
    description:
      - API server URL written into the kubeconfig, as the hosts that use it reach the server
        (e.g. a load balancer's name where the controller uses a tunnel). Empty = the one in O(kubeconfig).
      - Its TLS certificate must be valid for this name, under the CA of O(kubeconfig).
    type: str
    default: ""
"""

RETURN = r"""
path:
  description: The kubeconfig written or kept.
  type: str
  returned: always
expires:
  description: When its token expires (RFC 3339).
  type: str
  returned: always
renewed:
  description: Whether a new token was requested.
  type: bool
  returned: always
"""

import base64  # noqa: E402 - Ansible modules import after DOCUMENTATION
import datetime  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def jwt_claims(token: str) -> dict[str, Any]:
    """The payload of a JWT (not verified: only to read our own token's expiry and subject)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


def current_is_good(path: str, server: str, subject: str, uid: str, *, now: float, keep_above: float) -> float | None:
    """The expiry of the token in ``path`` when it is for ``subject`` (ServiceAccount UID ``uid``) at
    ``server`` with more than ``keep_above`` seconds left; else None."""
    import yaml  # noqa: PLC0415 - a dependency of Ansible itself

    try:
        with open(path, encoding="utf-8") as handle:
            doc = yaml.safe_load(handle)
        cluster = doc["clusters"][0]["cluster"]
        token = doc["users"][0]["user"]["token"]
    except (OSError, ValueError, KeyError, IndexError, TypeError, yaml.YAMLError):
        return None
    claims = jwt_claims(token)
    expires = claims.get("exp")
    account = (claims.get("kubernetes.io") or {}).get("serviceaccount") or {}
    if cluster.get("server") != server or claims.get("sub") != subject or not isinstance(expires, int | float):
        return None
    if account.get("uid") != uid:  # made for an earlier account of that name: the server refuses it
        return None
    return float(expires) if expires - now > keep_above else None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "kubeconfig": {"type": "path", "required": True},
            "namespace": {"type": "str", "required": True},
            "service_account": {"type": "str", "required": True},
            "expiration_seconds": {"type": "int", "default": 90 * 86400},
            "dest_dir": {"type": "path", "required": True},
            "renew": {"type": "bool", "default": False},
            "server": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["expiration_seconds"] < 600:
        module.fail_json(
            msg=f"expiration_seconds must be at least 600 (the API's minimum), got {p['expiration_seconds']}"
        )
    try:
        from kubernetes import client, config  # noqa: PLC0415
        from kubernetes.client.rest import ApiException  # noqa: PLC0415
    except ImportError:
        module.fail_json(msg="the Python package 'kubernetes' is missing on the controller; run `make setup`")
    try:
        api = config.new_client_from_config(config_file=p["kubeconfig"])
    except Exception as exc:  # the kubeconfig loader raises several kinds
        module.fail_json(msg=f"cannot load kubeconfig {p['kubeconfig']}: {exc}")
    server = p["server"] or api.configuration.host
    if not server.startswith(("https://", "http://")):
        module.fail_json(msg=f"server must be a URL such as https://api.example:6443, got {server!r}")
    subject = f"system:serviceaccount:{p['namespace']}:{p['service_account']}"
    name = f"{p['namespace']}.{p['service_account']}.{hashlib.sha1(server.encode()).hexdigest()[:8]}.kubeconfig"  # noqa: S324 - a file name
    path = os.path.join(p["dest_dir"], name)
    core = client.CoreV1Api(api)
    uid = _account_uid(module, core, p["namespace"], p["service_account"])
    now = time.time()
    kept = current_is_good(path, server, subject, uid, now=now, keep_above=p["expiration_seconds"] / 3)
    if kept is not None and not p["renew"]:
        module.exit_json(changed=False, path=path, expires=_rfc3339(kept), renewed=False)
    if module.check_mode:
        module.exit_json(changed=True, path=path, expires="", renewed=True)
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": p["expiration_seconds"]}}  # fmt: skip
    try:
        reply = core.create_namespaced_service_account_token(
            p["service_account"], p["namespace"], body, _preload_content=False
        )
        status = json.loads(reply.data)["status"]
    except ApiException as exc:
        module.fail_json(
            msg=f"TokenRequest for {subject} failed: HTTP {exc.status} {exc.reason}; does the ServiceAccount exist "
            "(role mco_crds) and may the kubeconfig create serviceaccounts/token?"
        )
    ca_file = api.configuration.ssl_ca_cert
    cluster: dict[str, Any] = {"server": server}
    if ca_file:
        with open(ca_file, "rb") as handle:
            cluster["certificate-authority-data"] = base64.b64encode(handle.read()).decode()
    elif server.startswith("https") and not api.configuration.verify_ssl:
        cluster["insecure-skip-tls-verify"] = True
    user = p["service_account"]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": status["token"]}}],
        "contexts": [{"name": user, "context": {"cluster": "cluster", "user": user, "namespace": p["namespace"]}}],
        "current-context": user,
    }
    os.makedirs(p["dest_dir"], mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p["dest_dir"], prefix=".tmp-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:  # mkstemp: mode 0600
        json.dump(doc, handle, indent=2)
    os.replace(tmp, path)
    module.exit_json(changed=True, path=path, expires=status.get("expirationTimestamp", ""), renewed=True)


def _account_uid(module: AnsibleModule, core: Any, namespace: str, name: str) -> str:
    """The ServiceAccount's UID (its tokens name it); fails the module, saying what to check."""
    from kubernetes.client.rest import ApiException  # noqa: PLC0415

    try:
        return str(core.read_namespaced_service_account(name, namespace).metadata.uid)
    except ApiException as exc:
        module.fail_json(
            msg=f"cannot read ServiceAccount {namespace}/{name}: HTTP {exc.status} {exc.reason}; does the "
            "ServiceAccount exist (role mco_crds) and may the kubeconfig read serviceaccounts?"
        )
    raise AssertionError("fail_json returns no more")


def _rfc3339(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


if __name__ == "__main__":
    main()
