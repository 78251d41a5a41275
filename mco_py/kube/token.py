"""A service renews its own ServiceAccount token, as the kubelet renews a projected token.

At 80 % of the token's lifetime (``iat`` to ``exp``) :class:`TokenRenewer` asks the TokenRequest
API (``POST .../serviceaccounts/<its own name>/token``, authenticated by the token still valid)
for a token of the same lifetime, switches the ``ApiClient`` to it (requests already open,
watches included, keep going: a bearer token is checked per request) and writes the kubeconfig
again atomically, so a restart, the expiry gauge and ``mco doctor`` see the new token.

The RBAC for it is ``create`` on ``serviceaccounts/token`` with ``resourceNames`` the service's
own ServiceAccount (role mco_crds): a service can renew its own token and no other.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from mco_py.errors import ConfigError, MCOError
from mco_py.kube.client import translate
from mco_py.obs.credentials import Validity, kubeconfig_user, token_claims, token_validity

log = logging.getLogger(__name__)

#: Share of a token's lifetime after which it is renewed (the kubelet's rule for projected tokens).
RENEW_AT = 0.8


@dataclass(frozen=True, slots=True)
class Account:
    """The ServiceAccount a token was issued for (from its claims)."""

    namespace: str
    name: str


def account_of(token: str) -> Account | None:
    """The ServiceAccount of a bound token (``kubernetes.io`` claims); None for any other token."""
    try:
        claims = token_claims(token)
    except ValueError:
        return None
    scope = claims.get("kubernetes.io")
    if not isinstance(scope, dict):
        return None
    account, namespace = scope.get("serviceaccount"), scope.get("namespace")
    name = account.get("name") if isinstance(account, dict) else None
    if isinstance(namespace, str) and isinstance(name, str) and namespace and name:
        return Account(namespace, name)
    return None


def renew_time(validity: Validity, share: float = RENEW_AT) -> float:
    """When to renew a token (epoch seconds): ``share`` of its lifetime after it was issued."""
    return validity.not_before + share * validity.lifetime


def replace_token(document: Any, token: str) -> Any:
    """The kubeconfig ``document`` with its current user's token replaced (in a copy)."""
    doc = json.loads(json.dumps(document))
    user = kubeconfig_user(yaml.safe_dump(doc).encode())
    for entry in doc.get("users") or []:
        if isinstance(entry, dict) and entry.get("user") == user:
            entry["user"] = {**user, "token": token}
            entry["user"].pop("tokenFile", None)
    return doc


class TokenRenewer:
    """Keeps the ServiceAccount token of ``kubeconfig`` (loaded into ``api``) fresh until stopped.

    A failed renewal is retried (every ``retry`` seconds, at most a twentieth of the lifetime)
    while the token lasts; each attempt's result goes to ``on_result`` ("renewed", "error").
    """

    def __init__(
        self,
        api: client.ApiClient,
        kubeconfig: Path,
        *,
        share: float = RENEW_AT,
        retry: float = 30.0,
        on_result: Callable[[str], None] = lambda _: None,
    ) -> None:
        if not 0 < share < 1:
            raise ConfigError(f"token renewal share must be between 0 and 1, got {share}")
        self.api = api
        self.kubeconfig = kubeconfig
        self.share = share
        self.retry = retry
        self.on_result = on_result
        self.token, self.validity, self.account = self._read()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _read(self) -> tuple[str, Validity, Account]:
        try:
            user = kubeconfig_user(self.kubeconfig.read_bytes())
        except (OSError, ValueError, yaml.YAMLError) as exc:
            raise ConfigError(f"kubeconfig {self.kubeconfig}: cannot read its user: {exc}") from exc
        token = user.get("token")
        if not isinstance(token, str) or not token:
            raise ConfigError(f"kubeconfig {self.kubeconfig} has no inline token to renew")
        account = account_of(token)
        if account is None:
            raise ConfigError(f"kubeconfig {self.kubeconfig}: its token is not a ServiceAccount's bound token")
        validity = token_validity(token)
        if validity.lifetime != validity.lifetime:  # NaN: no iat
            raise ConfigError(f"kubeconfig {self.kubeconfig}: its token has no 'iat': no lifetime to renew within")
        return token, validity, account

    @property
    def due(self) -> float:
        """When the current token is renewed (epoch seconds)."""
        return renew_time(self.validity, self.share)

    def renew(self) -> Validity:
        """Ask for a new token now, switch to it and write the kubeconfig. Raises MCOError saying why not."""
        seconds = round(self.validity.lifetime)  # the lifetime the installer chose (mco_service_token_days)
        # no audiences: the API server's own (the token authenticates to it, like the one it replaces)
        body = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
        )
        what = f"TokenRequest for ServiceAccount {self.account.namespace}/{self.account.name}"
        try:
            reply = client.CoreV1Api(self.api).create_namespaced_service_account_token(
                self.account.name, self.account.namespace, body
            )
            if reply.status is None or not reply.status.token:
                raise ValueError("no status.token")
            token = reply.status.token
            validity = token_validity(token)
        except (ApiException, HTTPError, OSError) as exc:
            raise translate(exc, what=what) from exc
        except (ValueError, AttributeError) as exc:
            raise MCOError(f"{what}: the answer holds no bounded token: {exc}") from exc
        self._switch(token)
        self.token, self.validity = token, validity
        self._write(token)
        return validity

    def _switch(self, token: str) -> None:
        configuration = self.api.configuration
        # the kubeconfig loader's hook would put the token it loaded back before every request
        configuration.refresh_api_key_hook = None
        configuration.api_key["BearerToken"] = f"Bearer {token}"
        configuration.api_key.pop("authorization", None)

    def _write(self, token: str) -> None:
        """The kubeconfig with the new token, replaced atomically with the old file's mode; when its
        directory is not writable the new token is used in memory only (and the log says so)."""
        path = self.kubeconfig
        try:
            document = yaml.safe_load(path.read_bytes())
            mode = path.stat().st_mode & 0o777
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    os.fchmod(handle.fileno(), mode)
                    json.dump(replace_token(document, token), handle, indent=2)
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
        except (OSError, ValueError, yaml.YAMLError) as exc:
            log.warning(
                "renewed token in use, but kubeconfig %s cannot be rewritten (%s): a restart loads the old token",
                path,
                exc,
                extra={"kubeconfig": str(path)},
            )

    def step(self, now: float) -> float:
        """Renew if due at ``now``; the seconds to wait before the next step."""
        if now < self.due:
            return self.due - now
        try:
            validity = self.renew()
        except MCOError as exc:
            self.on_result("error")
            left = self.validity.not_after - now
            wait = min(self.retry, max(1.0, self.validity.lifetime / 20))
            log.error(
                "cannot renew the ServiceAccount token (%s left; retrying in %.0f s): %s",
                f"{left:.0f} s" if left > 0 else "expired",
                wait,
                exc,
                extra={"kubeconfig": str(self.kubeconfig)},
            )
            return wait
        self.on_result("renewed")
        log.info(
            "renewed the ServiceAccount token of %s/%s; it expires at %s",
            self.account.namespace,
            self.account.name,
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(validity.not_after)),
            extra={"kubeconfig": str(self.kubeconfig), "expires": validity.not_after},
        )
        return max(0.0, self.due - now)

    def start(self) -> None:
        def run() -> None:
            wait = 0.0
            while not self._stop.wait(wait):
                wait = self.step(time.time())

        self._thread = threading.Thread(target=run, name="token-renewer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def renew_in_background(
    api: client.ApiClient, kubeconfig: Path, *, on_result: Callable[[str], None]
) -> TokenRenewer | None:
    """Start renewing the token of ``kubeconfig`` (loaded into ``api``); None, and a log line saying why,
    when it holds no ServiceAccount token to renew (an operator's own kubeconfig)."""
    try:
        renewer = TokenRenewer(api, kubeconfig, on_result=on_result)
    except ConfigError as exc:
        log.info(
            "the kubeconfig's token is not renewed by this service: %s", exc, extra={"kubeconfig": str(kubeconfig)}
        )
        return None
    renewer.start()
    log.info(
        "renewing the ServiceAccount token of %s/%s from %s",
        renewer.account.namespace,
        renewer.account.name,
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(renewer.due)),
        extra={"kubeconfig": str(kubeconfig)},
    )
    return renewer
