"""What ``mco doctor --cluster`` reads from the API server (reads only, plus SubjectAccessReviews,
which change nothing): the objects :class:`~mco_py.doctor.cluster_view.ClusterView` holds."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from mco_py.doctor.cluster_checks import GUARD_PODS_PROBE, access_table
from mco_py.doctor.cluster_view import (
    CRD_NAME,
    KATA_RUNTIME_CLASS,
    KUBE_SCHEDULER_CONFIGMAP,
    KUBE_SCHEDULER_CONFIGMAP_KEY,
    LEASE_NAME,
    NAMESPACE,
    REPORT_NAME,
    VOLCANO_CONFIGMAP,
    VOLCANO_DEPLOYMENT,
    VOLCANO_NAMESPACE,
    Access,
    ClusterView,
    Read,
    SchedulerFile,
    json_get,
)
from mco_py.doctor.kube_scheduler_checks import mco_extender_cas
from mco_py.model import GROUP, PLURAL, VERSION
from mco_py.report.shards import REPORT_LABEL, SHARD_PLURAL


class Api:
    """JSON GETs and POSTs through a configured ``ApiClient`` (its TLS, token and proxy settings)."""

    def __init__(self, api_client: client.ApiClient, *, timeout: float, namespace: str = NAMESPACE) -> None:
        self._api = api_client
        self.namespace = namespace
        """MCO's namespace: its ServiceAccounts' (the identities :meth:`may` asks about)."""
        self._timeout = timeout
        self._server_offset: float | None = None
        """The API server's clock minus this machine's (from its answers' Date header): ages are
        judged on the cluster's clock."""

    @property
    def timeout(self) -> float:
        """Seconds each request may take."""
        return self._timeout

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """The JSON answer. Raises ApiException (HTTP errors), HTTPError or OSError (unreachable)."""
        method, url, headers, payload, _ = self._api.param_serialize(
            method,
            path,
            header_params={"Accept": "application/json", "Content-Type": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self._api.call_api(method, url, header_params=headers, body=payload, _request_timeout=self._timeout)
        data = response.read()
        date = response.headers.get("Date") if response.headers else None
        if date:
            with contextlib.suppress(TypeError, ValueError):
                self._server_offset = parsedate_to_datetime(date).timestamp() - time.time()
        if not 200 <= response.status < 300:
            raise ApiException(status=response.status, reason=response.reason)
        return json.loads(data)

    def read(self, path: str) -> Read:
        """The object at ``path``; ``Read()`` when it does not exist; the error when it cannot be read."""
        try:
            return Read(self.request("GET", path))
        except ApiException as exc:
            if exc.status == 404:
                return Read()
            return Read(error=f"HTTP {exc.status} {exc.reason or ''}".strip())
        except (HTTPError, OSError, ValueError) as exc:  # ValueError: not JSON
            return Read(error=f"API server unreachable or garbled answer: {exc}")

    def may(self, question: Access) -> tuple[bool | None, str]:
        """The authorizer's answer for ``question`` (a SubjectAccessReview, as a token of that
        ServiceAccount would be judged); None and why when it cannot be asked."""
        group, resource, name, subresource = question.parts()
        attributes = {"verb": question.verb, "group": group, "resource": resource}
        attributes |= {"name": name} if name else {}
        attributes |= {"subresource": subresource} if subresource else {}
        attributes |= {"namespace": question.namespace} if question.namespace else {}
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{self.namespace}:{question.identity}",
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{self.namespace}",
                    "system:authenticated",
                ],
                "resourceAttributes": attributes,
            },
        }
        try:
            answer = self.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body)
        except ApiException as exc:
            return None, f"SubjectAccessReview: HTTP {exc.status} {exc.reason or ''}".strip()
        except (HTTPError, OSError, ValueError) as exc:
            return None, f"SubjectAccessReview: {exc}"
        status = answer.get("status") if isinstance(answer, dict) else None
        return bool(status.get("allowed")) if isinstance(status, dict) else False, ""

    def now(self, wall: Callable[[], float]) -> float:
        """The API server's time now (this machine's when it sent no Date header)."""
        return wall() + (self._server_offset or 0.0)


def read_scheduler_file(path: Path) -> SchedulerFile:
    """A kube-scheduler configuration file's text (at most a MiB), or why it cannot be read."""
    try:
        with path.open("rb") as file:
            return SchedulerFile(str(path), text=file.read(1024 * 1024).decode("utf-8", "replace"))
    except OSError as exc:
        return SchedulerFile(str(path), error=exc.strerror or str(exc))


def extender_answer(url: str, *, timeout: float, ca: bytes | None = None) -> str:
    """'' when the host and port of ``url`` answer (``http``: ``GET /readyz``, straight, without a proxy;
    ``https``: a TLS handshake, whose certificate and name must verify against ``ca`` when given, the CA the
    scheduler's entry trusts: MCO's), else why not."""
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname or ""  # without user:password@
    except ValueError as exc:
        return str(exc)
    if parts.scheme == "https":
        return _tls_handshake(host, port or 443, timeout, ca)
    where = f"[{host}]" if ":" in host else host
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://{where}{f':{port}' if port else ''}/readyz", timeout=timeout):
            return ""
    except urllib.error.HTTPError:  # an HTTP answer: something serves there
        return ""
    except urllib.error.URLError as exc:
        return str(exc.reason)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return str(exc) or type(exc).__name__


def _tls_handshake(host: str, port: int, timeout: float, ca: bytes | None) -> str:
    """'' when ``host``:``port`` completes a TLS handshake (its certificate verified against ``ca`` when
    given, as the scheduler verifies it), or refuses one for want of a client certificate (the scheduler
    presents one); else why not."""
    if ca is None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        try:
            context = ssl.create_default_context(cadata=ca.decode("ascii", "replace"))
        except (ssl.SSLError, ValueError) as exc:
            return f"the entry's CA (tlsConfig.caData or caFile) is not a PEM certificate: {exc}"
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=host or None),
        ):
            return ""
    except ssl.SSLError as exc:
        return _tls_error(exc)
    except OSError as exc:
        return str(exc) or type(exc).__name__


def _tls_error(exc: ssl.SSLError) -> str:
    """Why a handshake did not reach the extender ('' for a port that asks for a client certificate)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"its certificate does not verify against the CA the entry trusts (tlsConfig.caData or caFile): "
            f"{exc.verify_message or exc}; the scheduler refuses it the same way"
        )
    text = str(exc)
    if "CERTIFICATE_REQUIRED" in text or "HANDSHAKE_FAILURE" in text:
        return ""
    if "WRONG_VERSION_NUMBER" in text or "record layer failure" in text:
        return (
            "it answers plain HTTP, not TLS: turn on the extender's TLS (mco_scheduler_extender_tls_*) or "
            "use an http:// urlPrefix"
        )
    return f"TLS handshake failed: {text}"


def probe_cluster(
    api: Api,
    *,
    kube_scheduler_files: Sequence[Path] = (),
    wall: Callable[[], float] = time.time,
    progress: Callable[[str], None] = lambda _: None,
) -> ClusterView:
    """Everything :func:`~mco_py.doctor.cluster_checks.judge_cluster` needs (``kube_scheduler_files``: the
    cluster's kube-scheduler configuration files on this machine)."""
    files = [read_scheduler_file(path) for path in kube_scheduler_files]
    progress("reading the report and its CRD")
    crd = api.read(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")
    if crd.error and not crd.error.startswith(("HTTP 403", "HTTP 5")):  # unreachable, or not let in at all
        answers = extender_answers([f.text for f in files], api.timeout)
        return ClusterView(
            now=api.now(wall),
            namespace=api.namespace,
            crd=crd,
            kube_scheduler_files=files,
            extender_answers=answers,
            reachable=False,
        )
    report = api.read(f"/apis/{GROUP}/{VERSION}/{PLURAL}/{REPORT_NAME}")
    index = report.doc.get("status", {}).get("shards") if isinstance(report.doc, dict) else None
    shards = (
        api.read(f"/apis/{GROUP}/{VERSION}/{SHARD_PLURAL}?labelSelector={quote(f'{REPORT_LABEL}={REPORT_NAME}')}")
        if isinstance(index, dict) and index.get("count")
        else Read()
    )
    nodes = api.read("/api/v1/nodes")
    lease = api.read(f"/apis/coordination.k8s.io/v1/namespaces/{api.namespace}/leases/{LEASE_NAME}")
    progress("reading Volcano's scheduler configuration and the Kata RuntimeClass")
    volcano_conf = api.read(f"/api/v1/namespaces/{VOLCANO_NAMESPACE}/configmaps/{VOLCANO_CONFIGMAP}")
    deployment = (
        api.read(f"/apis/apps/v1/namespaces/{VOLCANO_NAMESPACE}/deployments/{VOLCANO_DEPLOYMENT}")
        if volcano_conf.doc is not None
        else Read()
    )
    runtime_class = api.read(f"/apis/node.k8s.io/v1/runtimeclasses/{quote(KATA_RUNTIME_CLASS)}")
    progress("reading kube-scheduler's configuration and calling the extender URLs it names")
    kube_scheduler = api.read(f"/api/v1/namespaces/{api.namespace}/configmaps/{KUBE_SCHEDULER_CONFIGMAP}")
    ours = json_get(kube_scheduler.doc, "data", KUBE_SCHEDULER_CONFIGMAP_KEY)
    answers = extender_answers([ours if isinstance(ours, str) else None, *(f.text for f in files)], api.timeout)
    progress("asking the authorizer what each MCO identity may do")
    guard_pods = api.may(GUARD_PODS_PROBE)[0] is True  # the analyzer may list Pods: mco_guard_pods is on
    access = [(question, *api.may(question)) for question in access_table(guard_pods, api.namespace)]
    return ClusterView(
        now=api.now(wall),
        namespace=api.namespace,
        crd=crd,
        report=report,
        shards=shards,
        nodes=nodes,
        lease=lease,
        volcano_conf=volcano_conf,
        volcano_deployment=deployment,
        runtime_class=runtime_class,
        kube_scheduler_conf=kube_scheduler,
        kube_scheduler_files=files,
        extender_answers=answers,
        access=access,
    )


def extender_answers(texts: Sequence[str | None], timeout: float) -> dict[str, str]:
    """:func:`extender_answer` for every MCO extender URL in these kube-scheduler configurations, verified
    against the CA its entry trusts."""
    targets = {url: ca for text in texts for url, ca in mco_extender_cas(text).items()}
    return {url: extender_answer(url, timeout=timeout, ca=ca) for url, ca in targets.items()}
