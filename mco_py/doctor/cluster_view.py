"""What ``mco doctor --cluster`` reads: the objects' names, the :class:`ClusterView` the probe fills, and
lenient readers of the JSON it holds (a missing or mistyped field reads as nothing)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mco_py.doctor.checks import Check, Verdict
from mco_py.model import GROUP, PLURAL

#: Where the mco_crds role puts MCO's namespaced objects by default (``mco_crds_namespace``).
NAMESPACE = "mco-system"
CRD_NAME = f"{PLURAL}.{GROUP}"
REPORT_NAME = "cluster"
LEASE_NAME = "mco-analyzer"
VOLCANO_NAMESPACE = "volcano-system"
VOLCANO_CONFIGMAP = "volcano-scheduler-configmap"
VOLCANO_CONF_KEY = "volcano-scheduler.conf"
VOLCANO_DEPLOYMENT = "volcano-scheduler"
#: The annotation on that Deployment naming the image the volcano role put there (plugin mode).
PLUGIN_IMAGE_ANNOTATION = "mco.many-core.io/plugin-image"
#: MCO's kube-scheduler's configuration (roles/mco_kube_scheduler: mco_kube_scheduler_name, its key).
KUBE_SCHEDULER_CONFIGMAP = "mco-kube-scheduler"
KUBE_SCHEDULER_CONFIGMAP_KEY = "config.yaml"
KATA_RUNTIME_CLASS = "kata-qemu"
KATA_LABEL = "katacontainers.io/kata-runtime"
KVM_LABEL = "mco.many-core.io/kvm-ready"
#: Below this, a 1,000-node prioritize call can time out (docs/extender.md; its time:
#: docs/benchmarks.md, "Extender").
MIN_HTTP_TIMEOUT_S = 1.0
#: Seconds of clock difference forgiven when an age is judged (``now`` is the API server's
#: clock when its answers carry a Date header, else this machine's).
CLOCK_SLACK_S = 2.0
#: Node names listed in a detail before "and N more".
NAMES_SHOWN = 5

DEPLOY_STEP = "rerun `ansible-playbook playbooks/site.yml` (docs/runbooks.md#deploy)"


@dataclass(frozen=True, slots=True)
class Access:
    """One question for the authorizer: may ServiceAccount ``identity`` (in ``mco-system``) do this?

    ``resource`` is written as for ``kubectl auth can-i``: ``resource[.group][/name][#subresource]``.
    """

    identity: str
    verb: str
    resource: str
    namespace: str = ""
    expected: bool = True
    """True: the identity needs it; False: it must not have it (least privilege)."""

    def parts(self) -> tuple[str, str, str, str]:
        """(group, resource, name, subresource)."""
        rest, _, subresource = self.resource.partition("#")
        kind, _, name = rest.partition("/")
        resource, _, group = kind.partition(".")
        return group, resource, name, subresource

    def describe(self) -> str:
        """``patch nodeinterferencereports.mco.many-core.io#status`` (``in mco-system``)."""
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.verb} {self.resource}{where}"


@dataclass(frozen=True, slots=True)
class Read:
    """One object (or list) read from the API server: the JSON document, or why there is none."""

    doc: Any = None
    """The object as JSON (``None``: not found, or not readable)."""
    error: str = ""
    """Why it could not be read (empty: read, or simply not there)."""


@dataclass(frozen=True, slots=True)
class SchedulerFile:
    """A kube-scheduler configuration file on this machine (``--kube-scheduler-config``): its text, or why
    it could not be read."""

    path: str
    text: str | None = None
    error: str = ""


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What the probe read; ``now`` is when (seconds since the Unix epoch)."""

    now: float
    namespace: str = NAMESPACE
    """The namespace of MCO's Lease, ConfigMaps and ServiceAccounts (``mco_crds_namespace``)."""
    crd: Read = field(default_factory=Read)
    report: Read = field(default_factory=Read)
    shards: Read = field(default_factory=Read)
    """The report's NodeInterferenceReportShardList (read only when the report is sharded)."""
    nodes: Read = field(default_factory=Read)
    """A NodeList."""
    lease: Read = field(default_factory=Read)
    volcano_conf: Read = field(default_factory=Read)
    """The scheduler ConfigMap."""
    volcano_deployment: Read = field(default_factory=Read)
    runtime_class: Read = field(default_factory=Read)
    kube_scheduler_conf: Read = field(default_factory=Read)
    """MCO's kube-scheduler's ConfigMap (``None`` doc: not installed)."""
    kube_scheduler_files: Sequence[SchedulerFile] = ()
    """The cluster's kube-scheduler configuration files given on the command line."""
    extender_answers: Mapping[str, str] = field(default_factory=dict)
    """Each MCO extender urlPrefix in those configurations: '' when it answered ``/readyz`` from here, else why not."""
    access: Sequence[tuple[Access, bool | None, str]] = ()
    """(question, the authorizer's answer or None, why there is no answer)."""
    reachable: bool = True
    """False: the first read failed for a reason every other read shares (unreachable, HTTP 401)."""


def unreadable_check(name: str, what: str, read: Read) -> Check:
    return Check(
        name,
        Verdict.FAIL,
        f"cannot read {what}: {read.error}",
        "check the kubeconfig (--kubeconfig, $KUBECONFIG) and that this user may read it",
    )


def json_items(read: Read) -> list[Mapping[str, Any]]:
    return [i for i in json_list(json_get(read.doc, "items")) if isinstance(i, Mapping)]


def json_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def node_labels(node: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = json_get(node, "metadata", "labels")
    return labels if isinstance(labels, Mapping) else {}


def names_text(names: Sequence[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")


def json_get(doc: Any, *path: str) -> Any:
    """``doc[path[0]][path[1]]...``; None when any step is missing or not a mapping."""
    value: Any = doc
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def rfc3339_epoch(value: object) -> float | None:
    """Seconds since the epoch of an RFC 3339 time (``2026-12-02T10:00:00Z``, micro time too)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def shown_url(url: str) -> str:
    """``url`` fit to print: a password in it (basic auth in a scheduler's urlPrefix) as ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url if "@" not in url else "<an unparsable URL with credentials>"
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))
