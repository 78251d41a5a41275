"""What ``mco doctor --cluster`` concludes from what it read from the API server: pure functions.

The probe (:mod:`mco_py.doctor.cluster_probe`) reads a
:class:`~mco_py.doctor.cluster_view.ClusterView` (the report's CRD and object, Nodes, the
analyzer's Lease, Volcano's scheduler configuration and version, kube-scheduler's (MCO's ConfigMap, the
cluster's files), the Kata RuntimeClass, and the
authorizer's answer for each MCO identity); :func:`judge_cluster` turns it into
:class:`~mco_py.doctor.checks.Check` results (Volcano's: :mod:`mco_py.doctor.volcano_checks`;
kube-scheduler's: :mod:`mco_py.doctor.kube_scheduler_checks`).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import replace

from mco_py.doctor.checks import Check, Verdict
from mco_py.doctor.cluster_view import (
    CLOCK_SLACK_S,
    CRD_NAME,
    DEPLOY_STEP,
    KATA_LABEL,
    KATA_RUNTIME_CLASS,
    KVM_LABEL,
    LEASE_NAME,
    NAMESPACE,
    REPORT_NAME,
    Access,
    ClusterView,
    Read,
    json_get,
    json_items,
    names_text,
    node_labels,
    rfc3339_epoch,
    unreadable_check,
)
from mco_py.doctor.kube_scheduler_checks import kube_scheduler_checks
from mco_py.doctor.volcano_checks import volcano_checks
from mco_py.errors import ReportError
from mco_py.model import GROUP, Level, NodeAssessment
from mco_py.report.assemble import gather, index_of, shard_of
from mco_py.report.document import ShardIndex, Status, decode, report_of
from mco_py.report.shards import SHARD_KIND, SHARD_PLURAL


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
        (True, "create", "serviceaccounts/mco-analyzer#token", NAMESPACE),
        (False, "create", "serviceaccounts/mco-scheduler-extender#token", NAMESPACE),
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
        (True, "create", "serviceaccounts/mco-scheduler-extender#token", NAMESPACE),
        (False, "create", "serviceaccounts/mco-analyzer#token", NAMESPACE),
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


def access_table(guard_pods: bool, namespace: str = NAMESPACE) -> tuple[Access, ...]:
    """The questions and the answers expected, for an install without or with ``mco_guard_pods``, its
    namespaced objects in ``namespace`` (``mco_crds_namespace``)."""
    if not guard_pods:
        table = (*ACCESS, replace(GUARD_PODS_PROBE, expected=False))
    else:
        replaced = {(a.identity, a.verb, a.resource, a.namespace) for a in GUARD_PODS_ACCESS}
        kept = tuple(a for a in ACCESS if (a.identity, a.verb, a.resource, a.namespace) not in replaced)
        table = (*kept, *GUARD_PODS_ACCESS)
    return tuple(replace(a, namespace=namespace) if a.namespace == NAMESPACE else a for a in table)


def judge_cluster(view: ClusterView, *, ttl: float) -> list[Check]:
    """Every cluster check, in the order an operator would look (``ttl``: the extender's
    ``crStatusTTLSeconds``)."""
    checks = [_crd(view.crd)]
    if not view.reachable:  # a configuration file given on the command line needs no API server
        return checks + list(
            kube_scheduler_checks(Read(), view.kube_scheduler_files, view.extender_answers, view.namespace)
        )
    checks += _report(view, ttl)
    checks.append(_lease(view.lease, view.now, view.namespace))
    checks += volcano_checks(view.volcano_conf, view.volcano_deployment)
    checks += kube_scheduler_checks(
        view.kube_scheduler_conf, view.kube_scheduler_files, view.extender_answers, view.namespace
    )
    checks += _kata(view.runtime_class, view.nodes)
    checks += _access(view.access)
    return checks


def _crd(read: Read) -> Check:
    name = "report CRD"
    if read.error:
        return unreadable_check(name, f"CustomResourceDefinition {CRD_NAME}", read)
    if read.doc is None:
        return Check(name, Verdict.FAIL, f"CustomResourceDefinition {CRD_NAME} is not installed", DEPLOY_STEP)
    conditions = json_get(read.doc, "status", "conditions")
    established = any(
        json_get(c, "type") == "Established" and json_get(c, "status") == "True"
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
        yield unreadable_check(name, f"NodeInterferenceReport {REPORT_NAME}", read)
        return
    if read.doc is None:
        yield Check(
            name,
            Verdict.FAIL,
            f"no NodeInterferenceReport {REPORT_NAME}: no analyzer has written one",
            "check the analyzer on the control hosts (`mco doctor` there; its log)",
        )
        return
    status = json_get(read.doc, "status") or {}
    updated = rfc3339_epoch(json_get(status, "lastUpdateTime"))
    rules = str(json_get(status, "analyzer", "rulesVersion") or "?")
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
        writer = json_get(status, "analyzer", "identity") or "?"
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
        yield unreadable_check(name, f"the {SHARD_KIND}s of {REPORT_NAME}", read)
        return None
    shards = [shard_of(item) for item in json_items(read)]
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
        yield unreadable_check(name, "Nodes", nodes)
        return
    items = [n for n in json_items(nodes) if isinstance(json_get(n, "metadata", "name"), str)]
    control = {n["metadata"]["name"] for n in items if any(k in node_labels(n) for k in CONTROL_PLANE_LABELS)}
    cluster = sorted(n["metadata"]["name"] for n in items)
    missing = [n for n in cluster if n not in entries and n not in control]
    unknown = sorted(n for n, item in entries.items() if item.level is Level.UNKNOWN)
    high = sorted(n for n, item in entries.items() if item.level is Level.HIGH)
    if missing:
        yield Check(
            name,
            Verdict.WARN,
            f"{len(missing)} of {len(cluster)} Nodes have no entry (no collector data): {names_text(missing)}",
            "on those nodes: `mco doctor` (collector running? stream connected?)",
        )
    if unknown:
        yield Check(
            name,
            Verdict.WARN,
            f"{len(unknown)} nodes are Unknown (their samples stopped): {names_text(unknown)}",
            "on those nodes: `mco doctor` (collector stream connected?)",
        )
    if not missing and not unknown:
        detail = f"all {len(cluster)} Nodes reported"
        detail += f"; High: {names_text(high)}" if high else ""
        yield Check(name, Verdict.OK, detail)


def _lease(read: Read, now: float, namespace: str) -> Check:
    name = "analyzer leader"
    if read.error:
        return unreadable_check(name, f"Lease {namespace}/{LEASE_NAME}", read)
    if read.doc is None:
        return Check(
            name,
            Verdict.FAIL,
            f"no Lease {namespace}/{LEASE_NAME}: no cluster-mode analyzer has ever led",
            "start the analyzer (`systemctl start mco-analyzer` on a control host; docs/runbooks.md)",
        )
    spec = json_get(read.doc, "spec") or {}
    holder = str(json_get(spec, "holderIdentity") or "")
    renewed = rfc3339_epoch(json_get(spec, "renewTime"))
    seconds = json_get(spec, "leaseDurationSeconds")
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


def _kata(runtime_class: Read, nodes: Read) -> Iterator[Check]:
    name = "kata runtime"
    if runtime_class.error:
        yield unreadable_check(name, f"RuntimeClass {KATA_RUNTIME_CLASS}", runtime_class)
        return
    if nodes.error:
        return  # said by "nodes in the report"
    labels = {str(json_get(n, "metadata", "name")): node_labels(n) for n in json_items(nodes)}
    kata = sorted(n for n, lab in labels.items() if lab.get(KATA_LABEL) == "true")
    no_kvm = sorted(n for n in kata if labels[n].get(KVM_LABEL) == "false")
    if runtime_class.doc is None:
        detail = f"no RuntimeClass {KATA_RUNTIME_CLASS} (Kata isolation is off)"
        if kata:
            detail += f", yet {len(kata)} Nodes are labelled {KATA_LABEL}=true"
        yield Check(name, Verdict.OK, detail)
        return
    selector = json_get(runtime_class.doc, "scheduling", "nodeSelector")
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
        yield Check(name, Verdict.OK, f"{len(matching)} Nodes run {KATA_RUNTIME_CLASS}: {names_text(matching)}")
    if no_kvm:
        yield Check(
            "kvm",
            Verdict.FAIL,
            f"Kata Nodes without usable KVM ({KVM_LABEL}=false): {names_text(no_kvm)}; their Kata VMs cannot boot",
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
