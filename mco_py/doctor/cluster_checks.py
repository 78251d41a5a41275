"""What ``mco doctor --cluster`` concludes from what it read from the API server: pure functions.

The probe (:mod:`mco_py.doctor.cluster_probe`) reads a :class:`ClusterView` (the report's CRD and
object, Nodes, the analyzer's Lease, Volcano's scheduler configuration and version, the Kata
RuntimeClass, and the authorizer's answer for each MCO identity); :func:`judge_cluster` turns it
into :class:`~mco_py.doctor.checks.Check` results.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import yaml

from mco_py.doctor.checks import Check, Verdict
from mco_py.errors import ConfigError, ReportError
from mco_py.extender.app import volcano_format
from mco_py.extender.config import config_from_mapping
from mco_py.model import GROUP, PLURAL, Level, NodeAssessment
from mco_py.report.assemble import gather, index_of, shard_of
from mco_py.report.document import ShardIndex, Status, decode, report_of
from mco_py.report.shards import SHARD_KIND, SHARD_PLURAL

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


def _identity(name: str, *rows: tuple[bool, str, str, str]) -> tuple[Access, ...]:
    return tuple(Access(name, verb, resource, namespace, expected) for expected, verb, resource, namespace in rows)


_NIR = CRD_NAME
_NIRS = f"{SHARD_PLURAL}.{GROUP}"
#: What each MCO identity needs and must not have: the roles' RBAC (roles/mco_crds/templates/rbac.yaml.j2),
#: shown in docs/security.md and checked against the real kube-apiserver by the cluster tier.
ACCESS: tuple[Access, ...] = (
    *_identity(
        "mco-analyzer",
        (True, "get", _NIR, ""),
        (True, "create", _NIR, ""),
        (True, "patch", f"{_NIR}#status", ""),
        (False, "delete", _NIR, ""),
        (False, "patch", _NIR, ""),
        (True, "list", _NIRS, ""),
        (True, "create", _NIRS, ""),
        (True, "patch", f"{_NIRS}#status", ""),
        (True, "delete", _NIRS, ""),
        (False, "patch", _NIRS, ""),
        (True, "get", "configmaps/mco-detection-rules", NAMESPACE),
        (False, "get", "configmaps/other", NAMESPACE),
        (False, "list", "configmaps", NAMESPACE),
        (False, "update", "configmaps/mco-detection-rules", NAMESPACE),
        (True, "create", "events", NAMESPACE),
        (False, "create", "events", "default"),
        (True, "create", "leases.coordination.k8s.io", NAMESPACE),
        (True, "update", f"leases.coordination.k8s.io/{LEASE_NAME}", NAMESPACE),
        (False, "update", "leases.coordination.k8s.io/other", NAMESPACE),
        (False, "get", "secrets", NAMESPACE),
        (False, "list", "nodes", ""),
        (False, "create", "pods", "default"),
    ),
    *_identity(
        "mco-scheduler-extender",
        (True, "get", _NIR, ""),
        (True, "watch", _NIR, ""),
        (False, "patch", f"{_NIR}#status", ""),
        (False, "create", _NIR, ""),
        (True, "list", _NIRS, ""),
        (True, "watch", _NIRS, ""),
        (False, "patch", f"{_NIRS}#status", ""),
        (True, "list", "nodes", ""),
        (True, "watch", "nodes", ""),
        (False, "patch", "nodes", ""),
        (False, "get", "secrets", NAMESPACE),
        (False, "get", "configmaps", NAMESPACE),
        (False, "create", "pods#binding", "default"),
    ),
)


#: With ``mco_guard_pods`` (roles/mco_crds/templates/rbac-guard.yaml.j2) the analyzer also reads Pods
#: and posts Events on Nodes (in ``default``); these rows replace ACCESS's for the same questions.
GUARD_PODS_ACCESS: tuple[Access, ...] = _identity(
    "mco-analyzer",
    (True, "list", "pods", ""),
    (True, "watch", "pods", ""),
    (True, "create", "events", "default"),
    (False, "delete", "pods", "default"),
    (False, "create", "events", "kube-system"),
)
#: The question that tells a guard-pods install (the analyzer may list Pods) from a plain one.
GUARD_PODS_PROBE = GUARD_PODS_ACCESS[0]


def access_table(guard_pods: bool) -> tuple[Access, ...]:
    """The questions and the answers expected, for an install without or with ``mco_guard_pods``."""
    if not guard_pods:
        return (*ACCESS, replace(GUARD_PODS_PROBE, expected=False))
    replaced = {(a.identity, a.verb, a.resource, a.namespace) for a in GUARD_PODS_ACCESS}
    kept = tuple(a for a in ACCESS if (a.identity, a.verb, a.resource, a.namespace) not in replaced)
    return (*kept, *GUARD_PODS_ACCESS)


@dataclass(frozen=True, slots=True)
class Read:
    """One object (or list) read from the API server: the JSON document, or why there is none."""

    doc: Any = None
    """The object as JSON (``None``: not found, or not readable)."""
    error: str = ""
    """Why it could not be read (empty: read, or simply not there)."""


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What the probe read; ``now`` is when (seconds since the Unix epoch)."""

    now: float
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
    access: Sequence[tuple[Access, bool | None, str]] = ()
    """(question, the authorizer's answer or None, why there is no answer)."""
    reachable: bool = True
    """False: the first read failed for a reason every other read shares (unreachable, HTTP 401)."""


def judge_cluster(view: ClusterView, *, ttl: float) -> list[Check]:
    """Every cluster check, in the order an operator would look (``ttl``: the extender's
    ``crStatusTTLSeconds``)."""
    checks = [_crd(view.crd)]
    if not view.reachable:
        return checks
    checks += _report(view, ttl)
    checks.append(_lease(view.lease, view.now))
    checks += _volcano(view.volcano_conf, view.volcano_deployment)
    checks += _kata(view.runtime_class, view.nodes)
    checks += _access(view.access)
    return checks


def _unreadable(name: str, what: str, read: Read) -> Check:
    return Check(
        name,
        Verdict.FAIL,
        f"cannot read {what}: {read.error}",
        "check the kubeconfig (--kubeconfig, $KUBECONFIG) and that this user may read it",
    )


def _crd(read: Read) -> Check:
    name = "report CRD"
    if read.error:
        return _unreadable(name, f"CustomResourceDefinition {CRD_NAME}", read)
    if read.doc is None:
        return Check(name, Verdict.FAIL, f"CustomResourceDefinition {CRD_NAME} is not installed", DEPLOY_STEP)
    conditions = _get(read.doc, "status", "conditions")
    established = any(
        _get(c, "type") == "Established" and _get(c, "status") == "True"
        for c in (conditions if isinstance(conditions, list) else [])
    )
    if not established:
        return Check(
            name,
            Verdict.FAIL,
            f"{CRD_NAME} exists but is not Established",
            f"`kubectl describe crd {CRD_NAME}` shows why",
        )
    return Check(name, Verdict.OK, f"{CRD_NAME} established")


def _report(view: ClusterView, ttl: float) -> Iterator[Check]:
    name = "cluster report"
    read = view.report
    if read.error:
        yield _unreadable(name, f"NodeInterferenceReport {REPORT_NAME}", read)
        return
    if read.doc is None:
        yield Check(
            name,
            Verdict.FAIL,
            f"no NodeInterferenceReport {REPORT_NAME}: no analyzer has written one",
            "check the analyzer on the control hosts (`mco doctor` there; its log)",
        )
        return
    status = _get(read.doc, "status") or {}
    updated = _epoch(_get(status, "lastUpdateTime"))
    rules = str(_get(status, "analyzer", "rulesVersion") or "?")
    if updated is None:
        yield Check(name, Verdict.FAIL, "the report has no lastUpdateTime", "check the analyzer's log")
        return
    age = max(0.0, view.now - updated)
    if age > ttl + CLOCK_SLACK_S:
        yield Check(
            name,
            Verdict.FAIL,
            f"last written {age:.0f} s ago, beyond the extender's TTL ({ttl:g} s): schedulers run without it "
            "(basic mode)",
            "check the analyzer (`mco doctor` on a control host) and its Lease below",
        )
    else:
        writer = _get(status, "analyzer", "identity") or "?"
        yield Check(name, Verdict.OK, f"written {age:.0f} s ago by {writer} (TTL {ttl:g} s), rules {rules}")
    try:
        doc = decode(status, Status, "status")
        head = report_of(doc)
    except ReportError as exc:
        yield Check(
            "report content",
            Verdict.FAIL,
            f"unreadable: {exc}; the extender cannot use it and schedules without it (basic mode)",
            "check that the analyzer and the CRD are the same MCO version (`mco version`; runbooks, upgrade)",
        )
        return
    index = index_of(doc)
    nodes: Mapping[str, NodeAssessment] = {n.name: n for n in head.nodes}
    if index is not None:
        found = yield from _shards(index, view.shards)
        if found is None:
            return
        nodes = found
    yield from _coverage(nodes, view.nodes)


def _shards(index: ShardIndex, read: Read) -> Generator[Check, None, Mapping[str, NodeAssessment] | None]:
    """The nodes of a sharded report's generation, with its level changes laid over, from the shards
    there are (a check says when some are missing, behind or unreadable); None when the shards
    cannot be listed."""
    name = "report shards"
    if read.error:
        yield _unreadable(name, f"the {SHARD_KIND}s of {REPORT_NAME}", read)
        return None
    shards = [shard_of(item) for item in _items(read)]
    unreadable = [s.problem for s in shards if s.problem and s.generation in (index.generation, -1)]
    if unreadable:  # readers cannot serve this generation; which nodes it holds is unknown
        yield Check(
            name,
            Verdict.FAIL,
            f"generation {index.generation}: {unreadable[0]}"
            + (f" (and {len(unreadable) - 1} more)" if len(unreadable) > 1 else ""),
            "check that the analyzer and the CRDs are the same MCO version, and the analyzer's log",
        )
        return None
    try:
        nodes, problem = gather(index, shards)
    except ReportError as exc:
        yield Check(name, Verdict.FAIL, f"generation {index.generation}: {exc}", "check the analyzer's log")
        return None
    if problem:
        yield Check(
            name,
            Verdict.WARN,
            f"{problem}; readers keep the state they had until every shard is there",
            "if this lasts beyond a few report intervals, check the analyzer's log for write errors",
        )
    else:
        yield Check(name, Verdict.OK, f"generation {index.generation}: all {index.count} shards present")
    return nodes


#: Labels of control-plane Nodes, which usually run no collector (not counted as missing).
CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")


def _coverage(entries: Mapping[str, NodeAssessment], nodes: Read) -> Iterator[Check]:
    name = "nodes in the report"
    if nodes.error:
        yield _unreadable(name, "Nodes", nodes)
        return
    items = [n for n in _items(nodes) if isinstance(_get(n, "metadata", "name"), str)]
    control = {n["metadata"]["name"] for n in items if any(k in _labels(n) for k in CONTROL_PLANE_LABELS)}
    cluster = sorted(n["metadata"]["name"] for n in items)
    missing = [n for n in cluster if n not in entries and n not in control]
    unknown = sorted(n for n, item in entries.items() if item.level is Level.UNKNOWN)
    high = sorted(n for n, item in entries.items() if item.level is Level.HIGH)
    if missing:
        yield Check(
            name,
            Verdict.WARN,
            f"{len(missing)} of {len(cluster)} Nodes have no entry (no collector data): {_names(missing)}",
            "on those nodes: `mco doctor` (collector running? stream connected?)",
        )
    if unknown:
        yield Check(
            name,
            Verdict.WARN,
            f"{len(unknown)} nodes are Unknown (their samples stopped): {_names(unknown)}",
            "on those nodes: `mco doctor` (collector stream connected?)",
        )
    if not missing and not unknown:
        detail = f"all {len(cluster)} Nodes reported"
        detail += f"; High: {_names(high)}" if high else ""
        yield Check(name, Verdict.OK, detail)


def _lease(read: Read, now: float) -> Check:
    name = "analyzer leader"
    if read.error:
        return _unreadable(name, f"Lease {NAMESPACE}/{LEASE_NAME}", read)
    if read.doc is None:
        return Check(
            name,
            Verdict.FAIL,
            f"no Lease {NAMESPACE}/{LEASE_NAME}: no cluster-mode analyzer has ever led",
            "start the analyzer (`systemctl start mco-analyzer` on a control host; docs/runbooks.md)",
        )
    spec = _get(read.doc, "spec") or {}
    holder = str(_get(spec, "holderIdentity") or "")
    renewed = _epoch(_get(spec, "renewTime"))
    seconds = _get(spec, "leaseDurationSeconds")
    duration = float(seconds) if isinstance(seconds, int | float) and not isinstance(seconds, bool) else 15.0
    if not holder:
        return Check(name, Verdict.FAIL, "the Lease is released: no analyzer leads", "start an analyzer")
    if renewed is None or now - renewed > duration + CLOCK_SLACK_S:
        ago = "never renewed" if renewed is None else f"last renewed {now - renewed:.0f} s ago"
        return Check(
            name,
            Verdict.FAIL,
            f"{holder} held the Lease, {ago} (lease {duration:g} s): no analyzer leads",
            "check the analyzers on the control hosts (`mco doctor` there; their logs)",
        )
    return Check(name, Verdict.OK, f"{holder}, renewed {max(0.0, now - renewed):.0f} s ago")


def _volcano(conf: Read, deployment: Read) -> Iterator[Check]:
    name = "volcano scheduler"
    if conf.error:
        yield _unreadable(name, f"ConfigMap {VOLCANO_NAMESPACE}/{VOLCANO_CONFIGMAP}", conf)
        return
    if conf.doc is None:
        yield Check(name, Verdict.OK, f"no Volcano here ({VOLCANO_NAMESPACE}/{VOLCANO_CONFIGMAP} not found)")
        return
    text = _get(conf.doc, "data", VOLCANO_CONF_KEY)
    if not isinstance(text, str):
        yield Check(name, Verdict.FAIL, f"{VOLCANO_CONFIGMAP} has no key {VOLCANO_CONF_KEY}", DEPLOY_STEP)
        return
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        yield Check(name, Verdict.FAIL, f"{VOLCANO_CONF_KEY} is not YAML: {exc}", "fix the ConfigMap by hand")
        return
    plugins = [plugin for tier in _list(_get(doc, "tiers")) for plugin in _list(_get(tier, "plugins"))]
    entries = [p for p in plugins if isinstance(p, dict) and p.get("name") == "extender"]
    ours = [p for p in plugins if isinstance(p, dict) and p.get("name") == PLUGIN_NAME]
    if ours:
        yield _volcano_plugin(name, ours, deployment, extender=bool(entries))
        return
    if not entries:
        yield Check(
            name,
            Verdict.FAIL,
            "Volcano runs without MCO (no mco-plugin entry, no extender entry): its pods are placed without the report",
            f"{DEPLOY_STEP} with volcano_manage_scheduler_config: true, or add the entry the role prints",
        )
        return
    yield _volcano_extender(name, entries, deployment)


def _volcano_extender(name: str, entries: list[dict[str, Any]], deployment: Read) -> Check:
    """Extender mode: MCO's extender entry, in the reply format of the Volcano that runs."""
    arguments = _get(entries[0], "arguments")
    arguments = arguments if isinstance(arguments, dict) else {}
    problems = list(volcano_argument_problems(arguments))
    running = _volcano_version(deployment)
    url = str(arguments.get("extender.urlPrefix", ""))
    match = re.search(r"/volcano/v(\d+(?:\.\d+)*)/?$", url)
    if running and match:
        wanted, got = volcano_format(running, "1.10"), volcano_format(match[1], "1.10")
        if wanted != got:
            problems.append(
                f"urlPrefix asks for Volcano {match[1]}'s reply format but v{running} runs (a wrong format lets "
                "every pod pass)"
            )
    if len(entries) > 1:
        problems.append(f"{len(entries)} extender entries; Volcano uses only one")
    if problems:
        return Check(name, Verdict.FAIL, "; ".join(problems), DEPLOY_STEP + " (it writes the entry)")
    version = f", Volcano v{running}" if running else ""
    return Check(name, Verdict.OK, f"extender {url}{version}")


#: The plugin's name in Volcano's configuration, and the arguments it reads (docs/scheduling.md).
PLUGIN_NAME = "mco-plugin"
PLUGIN_ARGUMENTS = (
    "crName", "crStatusTTLSeconds", "fallbackWhenCROutdated", "hardConstraints", "kataRuntimeClassPrefixes",
    "scoreWeight", "unknownScore", "maxClockSkewSeconds",
)  # fmt: skip
#: The tag MCO's builds of vc-scheduler carry: the Volcano release, then ``-mco<MCO version>``.
_MCO_BUILD = re.compile(r":v?\d+\.\d+\.\d+-mco[\w.]+(@.*)?$")


def _volcano_plugin(name: str, entries: list[dict[str, Any]], deployment: Read, *, extender: bool) -> Check:
    """Plugin mode: one entry, arguments the plugin takes, and a scheduler image that has the plugin."""
    problems = []
    if len(entries) > 1:
        problems.append(f"{len(entries)} mco-plugin entries; keep one")
    arguments = _get(entries[0], "arguments")
    arguments = arguments if isinstance(arguments, dict) else {}
    unknown = sorted(str(k) for k in arguments if k not in PLUGIN_ARGUMENTS)
    if unknown:
        problems.append(f"mco-plugin ignores the argument(s) {', '.join(unknown)}")
    try:
        config_from_mapping({k: v for k, v in arguments.items() if k in PLUGIN_ARGUMENTS}, source="mco-plugin")
    except ConfigError as exc:
        problems.append(f"{exc} (the plugin uses the default instead)")
    images = [
        str(_get(c, "image") or "") for c in _list(_get(deployment.doc, "spec", "template", "spec", "containers"))
    ]
    image = next((i for i in images if "vc-scheduler" in i), images[0] if images else "")
    marked = _get(deployment.doc, "metadata", "annotations", PLUGIN_IMAGE_ANNOTATION)
    if deployment.error or deployment.doc is None:
        where = "cannot be read" if deployment.error else "was not found"
        problems.append(f"Deployment {VOLCANO_NAMESPACE}/{VOLCANO_DEPLOYMENT} {where}: its image is not checked")
    elif image != marked and not _MCO_BUILD.search(image):
        problems.append(
            f"the scheduler runs {image or 'no image'}, which has no mco-plugin (Volcano skips a plugin it does "
            "not know: pods are placed without the report)"
        )
    if problems:
        return Check(name, Verdict.FAIL, "; ".join(problems), DEPLOY_STEP + " (plugin mode sets MCO's image)")
    running = _volcano_version(deployment)
    detail = f"mco-plugin in {image}" + (f", Volcano v{running}" if running else "")
    if extender:
        return Check(
            name,
            Verdict.WARN,
            detail + "; an extender entry too: every decision is made twice, the extender's cost without a gain",
            "rerun the volcano role: plugin mode removes MCO's extender entry",
        )
    return Check(name, Verdict.OK, detail)


def volcano_argument_problems(arguments: Mapping[str, Any]) -> Iterator[str]:
    """What is wrong with an ``extender`` entry's arguments for MCO (docs/volcano.md)."""
    url = arguments.get("extender.urlPrefix")
    if not isinstance(url, str) or not re.match(r"^https?://[^/]+/volcano/v\d+(\.\d+)*/?$", url):
        yield f"urlPrefix {url!r} is not MCO's (http://<service>:<port>/volcano/v1.9 or /volcano/v1.10)"
    if arguments.get("extender.predicateVerb") != "predicate":
        yield "predicateVerb must be 'predicate'"
    if arguments.get("extender.prioritizeVerb") != "prioritize":
        yield "prioritizeVerb must be 'prioritize'"
    ignorable = arguments.get("extender.ignorable")
    if ignorable is not True:
        what = "a string" if isinstance(ignorable, str) else repr(ignorable)
        yield f"ignorable must be the YAML bool true (is {what}): else a slow extender filters every node out"
    timeout = go_duration_seconds(arguments.get("extender.httpTimeout", "1s"))
    if timeout is None:
        yield f"httpTimeout {arguments.get('extender.httpTimeout')!r} is not a Go duration (e.g. 1s)"
    elif timeout < MIN_HTTP_TIMEOUT_S:
        yield f"httpTimeout {timeout:g} s is below {MIN_HTTP_TIMEOUT_S:g} s (a large prioritize call takes 0.3 s)"
    if "extender.onSessionOpenVerb" in arguments:
        yield "onSessionOpenVerb is set: it posts the whole cluster every session; remove it"


_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def go_duration_seconds(value: object) -> float | None:
    """Seconds in a Go duration string (``1s``, ``1m30s``, ``500ms``); None when it is not one."""
    if not isinstance(value, str) or not value:
        return None
    if value == "0":
        return 0.0
    parts = _GO_PART.findall(value)
    if "".join(number + unit for number, unit in parts) != value:
        return None
    return sum(float(number) * _GO_UNITS[unit] for number, unit in parts)


def _volcano_version(read: Read) -> str:
    """``1.10.0`` from the scheduler Deployment's image tag; empty when unknown."""
    containers = _list(_get(read.doc, "spec", "template", "spec", "containers"))
    images = [str(_get(c, "image") or "") for c in containers]
    image = next((i for i in images if "vc-scheduler" in i), images[0] if images else "")
    match = re.search(r":v?(\d+\.\d+\.\d+)(?:-mco[\w.]+)?(@.*)?$", image)
    return match[1] if match else ""


def _kata(runtime_class: Read, nodes: Read) -> Iterator[Check]:
    name = "kata runtime"
    if runtime_class.error:
        yield _unreadable(name, f"RuntimeClass {KATA_RUNTIME_CLASS}", runtime_class)
        return
    if nodes.error:
        return  # said by "nodes in the report"
    labels = {str(_get(n, "metadata", "name")): _labels(n) for n in _items(nodes)}
    kata = sorted(n for n, lab in labels.items() if lab.get(KATA_LABEL) == "true")
    no_kvm = sorted(n for n in kata if labels[n].get(KVM_LABEL) == "false")
    if runtime_class.doc is None:
        detail = f"no RuntimeClass {KATA_RUNTIME_CLASS} (Kata isolation is off)"
        if kata:
            detail += f", yet {len(kata)} Nodes are labelled {KATA_LABEL}=true"
        yield Check(name, Verdict.OK, detail)
        return
    selector = _get(runtime_class.doc, "scheduling", "nodeSelector")
    selector = selector if isinstance(selector, Mapping) else {}
    matching = sorted(n for n, lab in labels.items() if all(lab.get(k) == v for k, v in selector.items()))
    if not selector:
        yield Check(
            name,
            Verdict.WARN,
            f"RuntimeClass {KATA_RUNTIME_CLASS} has no scheduling.nodeSelector: Kata pods may land on Nodes "
            "without Kata and fail to start",
            f'select {KATA_LABEL}: "true" in it (the kata_runtime role does)',
        )
    elif not matching:
        yield Check(
            name,
            Verdict.FAIL,
            f"no Node matches RuntimeClass {KATA_RUNTIME_CLASS}'s nodeSelector {selector}: Kata pods stay Pending",
            "run the kata_runtime role on the nodes that should run offline pods (it labels them)",
        )
    else:
        yield Check(name, Verdict.OK, f"{len(matching)} Nodes run {KATA_RUNTIME_CLASS}: {_names(matching)}")
    if no_kvm:
        yield Check(
            "kvm",
            Verdict.FAIL,
            f"Kata Nodes without usable KVM ({KVM_LABEL}=false): {_names(no_kvm)}; their Kata VMs cannot boot",
            "see docs/runbooks.md (KVM checks) on those nodes, or remove Kata from them",
        )


def _access(answers: Sequence[tuple[Access, bool | None, str]]) -> Iterator[Check]:
    by_identity: dict[str, list[tuple[Access, bool | None, str]]] = {}
    for row in answers:
        by_identity.setdefault(row[0].identity, []).append(row)
    for identity, rows in by_identity.items():
        name = f"rbac {identity}"
        errors = sorted({why for _, answer, why in rows if answer is None})
        missing = [q.describe() for q, answer, _ in rows if q.expected and answer is False]
        extra = [q.describe() for q, answer, _ in rows if not q.expected and answer is True]
        if errors:
            yield Check(
                name,
                Verdict.WARN,
                "cannot ask the authorizer: " + "; ".join(errors),
                "run mco doctor --cluster with a kubeconfig that may create SubjectAccessReviews (cluster admin)",
            )
        elif missing:
            yield Check(name, Verdict.FAIL, "may not " + ", ".join(missing), DEPLOY_STEP + " (it writes the RBAC)")
        elif extra:
            yield Check(
                name,
                Verdict.WARN,
                "has more than it needs: may " + ", ".join(extra),
                "find the extra RoleBinding: `kubectl get rolebindings,clusterrolebindings -A -o wide "
                f"| grep {identity}`",
            )
        else:
            yield Check(name, Verdict.OK, f"least privilege ({len(rows)} questions answered as expected)")


def _items(read: Read) -> list[Mapping[str, Any]]:
    return [i for i in _list(_get(read.doc, "items")) if isinstance(i, Mapping)]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _labels(node: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = _get(node, "metadata", "labels")
    return labels if isinstance(labels, Mapping) else {}


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")


def _get(doc: Any, *path: str) -> Any:
    """``doc[path[0]][path[1]]...``; None when any step is missing or not a mapping."""
    value: Any = doc
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _epoch(value: object) -> float | None:
    """Seconds since the epoch of an RFC 3339 time (``2026-12-02T10:00:00Z``, micro time too)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
