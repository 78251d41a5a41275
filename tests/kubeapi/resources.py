"""The resource types the emulated server serves: built-ins and those defined by CRDs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.kubeapi.errors import FieldError
from tests.kubeapi.selectors import DEFAULT_FIELD_ERROR, OWN_FIELD_ERROR

Obj = dict[str, Any]

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
BASE_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True)
class ResourceType:
    """One served resource (group/version/plural) and the storage rules the real server applies to it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status: bool = False
    """Has a /status subresource: main writes keep the old status, /status writes keep all but status."""
    generation: bool = False
    """metadata.generation is kept and bumped on changes outside metadata (and status, with /status)."""
    status_on_create: bool = False
    """Status given on create is kept (Node); otherwise dropped when the type has /status."""
    name_rule: str = "subdomain"
    """metadata.name check: subdomain | label | dns1035 | path."""
    delete_returns_object: bool = False
    """DELETE answers with the object (else a Status with details), as the type's real registry does."""
    unconditional_update: bool = True
    """PUT without metadata.resourceVersion is allowed (custom resources and CRDs: no)."""
    verbs: tuple[str, ...] = VERBS
    fields: frozenset[str] = BASE_FIELDS
    """Field selector labels accepted on list/watch."""
    field_error: str = DEFAULT_FIELD_ERROR
    """Message for any other label (the kind's own conversion function, or the default one)."""
    schema: Obj | None = None
    """openAPIV3Schema of a custom resource (None: built-in, stored as given)."""
    crd: str = ""
    """Name of the defining CRD (custom resources only)."""
    storage_version: str = ""
    stored_as: tuple[str, str, str] | None = None
    """(group, version, plural) of the resource whose storage this one is a view of (events.k8s.io Events)."""
    renames: tuple[tuple[str, str], ...] = ()
    """(field here, field in the stored resource) for the top-level fields the two versions name differently."""
    extra: Obj = field(default_factory=dict)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return str(self.extra.get("singular") or self.kind.lower())

    @property
    def custom(self) -> bool:
        return bool(self.crd)

    @property
    def storage_key(self) -> tuple[str, str]:
        return (self.stored_as[0], self.stored_as[2]) if self.stored_as else (self.group, self.plural)

    @property
    def stored_api_version(self) -> str:
        if self.stored_as is None:
            return self.api_version
        group, version, _ = self.stored_as
        return f"{group}/{version}" if group else version

    def to_stored(self, obj: Obj) -> Obj:
        """``obj`` (this resource's form) with the stored resource's field names (in place)."""
        for here, stored in self.renames:
            if here in obj:
                obj[stored] = obj.pop(here)
        return obj

    def to_served(self, obj: Obj) -> Obj:
        """A stored object (in place) with this resource's field names."""
        for here, stored in self.renames:
            if stored in obj:
                obj[here] = obj.pop(stored)
        return obj

    def stored_path(self, path: tuple[str, ...]) -> tuple[str, ...]:
        """A field path of this resource's form in the stored form."""
        renamed = next((stored for here, stored in self.renames if path[:1] == (here,)), None)
        return (renamed, *path[1:]) if renamed else path

    def served_path(self, path: tuple[str, ...]) -> tuple[str, ...]:
        renamed = next((here for here, stored in self.renames if path[:1] == (stored,)), None)
        return (renamed, *path[1:]) if renamed else path

    def stored_field(self, label: str) -> str:
        """The stored object's path for a field selector label of this resource."""
        head, dot, rest = label.partition(".")
        return next((stored + dot + rest for here, stored in self.renames if here == head), label)

    def discovery(self) -> list[Obj]:
        main: Obj = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        out = [main]
        if self.status:
            out.append(
                {
                    "name": f"{self.plural}/status",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": self.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        return out


def _rt(group_version: str, plural: str, kind: str, namespaced: bool = True, **kw: Any) -> ResourceType:
    group, _, version = group_version.rpartition("/")
    return ResourceType(group=group, version=version, plural=plural, kind=kind, namespaced=namespaced, **kw)


_POD_FIELDS = BASE_FIELDS | {
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "spec.host",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
}
_EVENT_FIELDS = BASE_FIELDS | {
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
}
_EVENTS_V1_FIELDS = BASE_FIELDS | {
    "reason",
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reportingController",
    "type",
}
# events.k8s.io/v1 Events are v1 Events (one storage) under other field names (k8s pkg/apis/events/v1).
_EVENTS_V1_RENAMES = (
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
)
_OWN = {"field_error": OWN_FIELD_ERROR}
_WORKLOAD = {"status": True, "generation": True}

BUILTINS: tuple[ResourceType, ...] = (
    _rt("v1", "namespaces", "Namespace", False, short_names=("ns",), status=True, name_rule="label",
        delete_returns_object=True, status_on_create=True, fields=frozenset({"metadata.name", "status.phase"}),
        verbs=tuple(v for v in VERBS if v != "deletecollection"),
        **_OWN),
    _rt("v1", "nodes", "Node", False, short_names=("no",), status=True, status_on_create=True,
        fields=frozenset({"metadata.name", "spec.unschedulable"}), **_OWN),
    _rt("v1", "configmaps", "ConfigMap", short_names=("cm",)),
    _rt("v1", "secrets", "Secret", fields=BASE_FIELDS | {"type"}, **_OWN),
    _rt("v1", "services", "Service", short_names=("svc",), categories=("all",), status=True,
        name_rule="dns1035", delete_returns_object=True, fields=BASE_FIELDS | {"spec.clusterIP", "spec.type"}, **_OWN),
    _rt("v1", "endpoints", "Endpoints", short_names=("ep",)),
    _rt("v1", "serviceaccounts", "ServiceAccount", short_names=("sa",), delete_returns_object=True),
    _rt("v1", "events", "Event", short_names=("ev",), fields=_EVENT_FIELDS, **_OWN),
    _rt("v1", "pods", "Pod", short_names=("po",), categories=("all",), status=True,
        delete_returns_object=True, fields=_POD_FIELDS, **_OWN),
    _rt("apps/v1", "deployments", "Deployment", short_names=("deploy",), categories=("all",), **_WORKLOAD),
    _rt("apps/v1", "daemonsets", "DaemonSet", short_names=("ds",), categories=("all",), **_WORKLOAD),
    _rt("apps/v1", "statefulsets", "StatefulSet", short_names=("sts",), categories=("all",), **_WORKLOAD),
    _rt("apps/v1", "replicasets", "ReplicaSet", short_names=("rs",), categories=("all",), **_WORKLOAD),
    _rt("batch/v1", "jobs", "Job", categories=("all",), fields=BASE_FIELDS | {"status.successful"},
        field_error="field label {label} not supported for Job", **_WORKLOAD),
    _rt("batch/v1", "cronjobs", "CronJob", short_names=("cj",), categories=("all",), **_WORKLOAD),
    _rt("node.k8s.io/v1", "runtimeclasses", "RuntimeClass", False),
    _rt("coordination.k8s.io/v1", "leases", "Lease"),
    _rt("events.k8s.io/v1", "events", "Event", short_names=("ev",), fields=_EVENTS_V1_FIELDS, **_OWN,
        stored_as=("", "v1", "events"), renames=_EVENTS_V1_RENAMES),
    _rt("discovery.k8s.io/v1", "endpointslices", "EndpointSlice"),
    _rt("rbac.authorization.k8s.io/v1", "roles", "Role", name_rule="path"),
    _rt("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", name_rule="path"),
    _rt("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", False, name_rule="path"),
    _rt("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", False, name_rule="path"),
    _rt("apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", False,
        short_names=("crd", "crds"), categories=("api-extensions",), status=True, generation=True,
        delete_returns_object=True, unconditional_update=False),
    _rt("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", False, short_names=("pc",)),
    _rt("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False,
        categories=("api-extensions",), generation=True),
    _rt("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
        False, categories=("api-extensions",), generation=True),
    _rt("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", short_names=("pdb",), **_WORKLOAD),
)  # fmt: skip

CRD_GROUP = "apiextensions.k8s.io"


# ----------------------------------------------------------------------------- CRDs


def crd_errors(crd: Obj) -> list[FieldError]:
    """The structural checks the real server makes on a CRD that matter for serving it."""
    errors: list[FieldError] = []
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return [FieldError("Required", "spec")]
    names = spec.get("names") or {}
    for key in ("plural", "kind"):
        if not names.get(key):
            errors.append(FieldError("Required", f"spec.names.{key}"))
    if not spec.get("group"):
        errors.append(FieldError("Required", "spec.group"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        errors.append(
            FieldError("NotSupported", "spec.scope", spec.get("scope"), 'supported values: "Cluster", "Namespaced"')
        )
    versions = spec.get("versions") or []
    if not versions or sum(1 for v in versions if v.get("storage")) != 1:
        errors.append(
            FieldError("Invalid", "spec.versions", versions, "must have exactly one version marked as storage version")
        )
    for i, v in enumerate(versions):
        schema = (v.get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            errors.append(
                FieldError("Required", f"spec.versions[{i}].schema.openAPIV3Schema", detail="schemas are required")
            )
    name = (crd.get("metadata") or {}).get("name")
    if names.get("plural") and spec.get("group") and name != f"{names['plural']}.{spec['group']}":
        errors.append(FieldError("Invalid", "metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    return errors


def crd_defaults(crd: Obj) -> None:
    """Defaults the real server fills into a CRD's spec."""
    spec = crd["spec"]
    names = spec["names"]
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", names["kind"] + "List")
    spec.setdefault("conversion", {"strategy": "None"})


def initial_crd_status(crd: Obj) -> Obj:
    """The status a CRD is created with, before the server's controllers accept its names."""
    storage = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
    return {"conditions": None, "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": [storage]}


def crd_status(crd: Obj, old_status: Obj | None, now: str) -> Obj:
    """Names accepted and Established at once; transition times kept from the previous status."""
    previous = {c.get("type"): c for c in (old_status or {}).get("conditions") or []}

    def cond(kind: str, reason: str, message: str) -> Obj:
        when = (previous.get(kind) or {}).get("lastTransitionTime", now)
        return {"type": kind, "status": "True", "lastTransitionTime": when, "reason": reason, "message": message}

    storage = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
    stored = list((old_status or {}).get("storedVersions") or [])
    if storage not in stored:
        stored.append(storage)
    return {
        "conditions": [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": dict(crd["spec"]["names"]),
        "storedVersions": stored,
    }


def crd_resource_types(crd: Obj) -> list[ResourceType]:
    spec = crd["spec"]
    names = spec["names"]
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    out = []
    for v in spec["versions"]:
        if not v.get("served", True):
            continue
        out.append(
            ResourceType(
                group=spec["group"],
                version=v["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec["scope"] == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status="status" in (v.get("subresources") or {}),
                generation=True,
                unconditional_update=False,
                schema=v["schema"]["openAPIV3Schema"],
                crd=crd["metadata"]["name"],
                storage_version=storage,
                fields=BASE_FIELDS | {f["jsonPath"].lstrip(".") for f in v.get("selectableFields") or []},
                field_error=OWN_FIELD_ERROR,
                extra={"singular": names.get("singular"), "listKind": names.get("listKind")},
            )
        )
    return out
