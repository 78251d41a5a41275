"""Cluster report store: the ``status`` of the ``NodeInterferenceReport`` named ``cluster``.

Writes go to the status subresource
(``/apis/mco.many-core.io/v1alpha1/nodeinterferencereports/<name>/status``) with the
``resourceVersion`` just read, so a concurrent change gives 409: the store re-reads and
retries. A missing object is created first. Transient API errors are retried with a
short exponential backoff inside one write; past that the caller gets
:class:`~mco_py.errors.StoreUnavailable` and tries again at its next interval.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from mco_py.errors import ReportConflict, ReportError, ReportNotFound, StoreUnavailable, error_for_status
from mco_py.model import GROUP, KIND, PLURAL, VERSION, Report
from mco_py.report.document import report_of, status_of

log = logging.getLogger(__name__)


def translate(exc: Exception, *, what: str) -> ReportError:
    """Map a client exception to the store error a caller acts on (raise it ``from exc``)."""
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        return error_for_status(status, f"{what}: HTTP {status} {exc.reason or ''}".strip())
    return StoreUnavailable(f"{what}: API server unreachable: {exc}")


DEFAULT_NAME = "cluster"


class KubeReportStore:
    """Reads and writes the report CR through the Kubernetes API."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        name: str = DEFAULT_NAME,
        conflict_retries: int = 5,
        error_retries: int = 2,
        backoff_seconds: float = 0.2,
        request_timeout: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.name = name
        self.conflict_retries = conflict_retries
        self.error_retries = error_retries
        self.backoff = backoff_seconds
        self.timeout = request_timeout
        self.sleep = sleep

    def describe(self) -> str:
        return f"{KIND} {self.name} ({PLURAL}.{GROUP}/{VERSION})"

    def _get(self) -> dict[str, Any]:
        try:
            obj = cast(
                dict[str, Any],
                self.api.get_cluster_custom_object(GROUP, VERSION, PLURAL, self.name, _request_timeout=self.timeout),
            )
        except (ApiException, HTTPError, OSError) as exc:
            raise translate(exc, what=f"get {self.describe()}") from exc
        return obj

    def read(self) -> Report:
        obj = self._get()
        status = obj.get("status")
        if not isinstance(status, dict):
            raise ReportNotFound(f"{self.describe()} exists but has no status yet")
        try:
            return report_of(status)
        except ReportError as exc:
            raise ReportError(f"{self.describe()}: {exc}") from exc

    def _create(self) -> dict[str, Any]:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": self.name, "labels": {"app.kubernetes.io/name": "mco"}},
            "spec": {"description": "Per-node interference levels written by mco-analyzer"},
        }
        try:
            obj = cast(
                dict[str, Any],
                self.api.create_cluster_custom_object(GROUP, VERSION, PLURAL, body, _request_timeout=self.timeout),
            )
        except (ApiException, HTTPError, OSError) as exc:
            err = translate(exc, what=f"create {self.describe()}")
            if isinstance(err, ReportConflict):  # someone created it meanwhile
                return self._get()
            if isinstance(err, ReportNotFound):
                raise StoreUnavailable(
                    f"{err}; is the CRD {PLURAL}.{GROUP} installed? (mco_crds role or "
                    "kubectl apply -f mco_py/data/crds/nodeinterferencereports.yaml)"
                ) from exc
            raise err from exc
        log.info("created %s", self.describe())
        return obj

    def _replace_status(self, obj: dict[str, Any], status: Mapping[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": self.name, "resourceVersion": metadata.get("resourceVersion")},
            "status": status,
        }
        try:
            self.api.replace_cluster_custom_object_status(
                GROUP, VERSION, PLURAL, self.name, body, _request_timeout=self.timeout
            )
        except (ApiException, HTTPError, OSError) as exc:
            raise translate(exc, what=f"update {self.describe()} status") from exc

    def write(self, report: Report) -> None:
        self.write_status(status_of(report))

    def write_status(self, status: Mapping[str, Any]) -> None:
        conflicts = 0
        errors = 0
        while True:
            try:
                try:
                    obj = self._get()
                except ReportNotFound:
                    obj = self._create()
                self._replace_status(obj, status)
                return
            except ReportConflict:
                conflicts += 1
                if conflicts > self.conflict_retries:
                    raise
                log.debug("conflict writing %s; re-reading (%d)", self.describe(), conflicts)
            except ReportNotFound:
                # deleted between our read and write: create again next round
                conflicts += 1
                if conflicts > self.conflict_retries:
                    raise
            except StoreUnavailable:
                errors += 1
                if errors > self.error_retries:
                    raise
                self.sleep(self.backoff * 2 ** (errors - 1))
