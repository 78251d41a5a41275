"""Detection rules from the ConfigMap ``mco-detection-rules`` and Events about bad ones."""

from __future__ import annotations

import time
from collections.abc import Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from mco_py.errors import ReportNotFound
from mco_py.kube.client import translate
from mco_py.kube.events import event_body

INVALID_RULES_REASON = "InvalidDetectionRules"
MAX_EVENT_MESSAGE = 1024


class ConfigMapRulesSource:
    """Reads the rules text from a ConfigMap key; posts a Warning Event on it when the text is invalid."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        name: str = "mco-detection-rules",
        namespace: str = "mco-system",
        key: str = "rules.yaml",
        component: str = "mco-analyzer",
        instance: str = "",
        request_timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = client.CoreV1Api(api_client)
        self.name = name
        self.namespace = namespace
        self.key = key
        self.component = component
        self.instance = instance
        self.timeout = request_timeout
        self.clock = clock
        self._uid: str | None = None

    def describe(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name} key {self.key}"

    def fetch(self) -> str:
        """The rules text. Raises ReportNotFound (no ConfigMap or no key) or StoreUnavailable."""
        try:
            cm = self.api.read_namespaced_config_map(self.name, self.namespace, _request_timeout=self.timeout)
        except (ApiException, HTTPError, OSError) as exc:
            raise translate(exc, what=f"read {self.describe()}") from exc
        self._uid = cm.metadata.uid if cm.metadata else None
        data = cm.data or {}
        if self.key not in data:
            raise ReportNotFound(
                f"{self.describe()}: the ConfigMap has no key {self.key!r} (keys: {', '.join(sorted(data)) or 'none'})"
            )
        text: str = data[self.key]
        return text

    def report_invalid(self, message: str) -> None:
        """Post a ``Warning`` Event ``InvalidDetectionRules`` on the ConfigMap."""
        body = event_body(
            client.V1ObjectReference(
                api_version="v1", kind="ConfigMap", name=self.name, namespace=self.namespace, uid=self._uid
            ),
            namespace=self.namespace,
            reason=INVALID_RULES_REASON,
            message=message[:MAX_EVENT_MESSAGE],
            kind="Warning",
            component=self.component,
            instance=self.instance,
            when=self.clock(),
        )
        try:
            self.api.create_namespaced_event(self.namespace, body, _request_timeout=self.timeout)
        except (ApiException, HTTPError, OSError) as exc:
            raise translate(exc, what=f"create Event on {self.describe()}") from exc
