"""``mco doctor --cluster`` on kube-scheduler: MCO's own kube-scheduler (its ConfigMap) and the
cluster's (its configuration file, ``--kube-scheduler-config``) name MCO through mco-plugin or an
extender entry that scheduler can reach.

The cluster's kube-scheduler usually runs on the host network, where names resolve with the node's
resolver and never through cluster DNS: a ``*.svc`` urlPrefix does not resolve there, and with
``ignorable: true`` every pod is then placed without MCO and nothing says so.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

import yaml

from mco_py.doctor.checks import Check, Verdict
from mco_py.doctor.cluster_view import (
    KUBE_SCHEDULER_CONFIGMAP,
    KUBE_SCHEDULER_CONFIGMAP_KEY,
    MIN_HTTP_TIMEOUT_S,
    NAMESPACE,
    Read,
    SchedulerFile,
    json_get,
    json_list,
    shown_url,
)
from mco_py.doctor.volcano_checks import PLUGIN_NAME, go_duration_seconds, plugin_argument_problems

NAME = "kube-scheduler"
#: The path of MCO's kube-scheduler verbs (docs/extender.md): an extender entry ending so is MCO's.
_OURS = re.compile(r"/kube/?$")
#: Names only cluster DNS resolves.
_CLUSTER_DNS = re.compile(r"(?i)(\.svc|\.svc\.cluster\.local|\.cluster\.local)\.?$")
FILE_STEP = (
    "use the entry the mco_scheduler_extender role writes to /etc/mco/kube-scheduler-extender.yaml on a control "
    "host (docs/extender.md, kube-scheduler registration), then restart kube-scheduler"
)
ROLE_STEP = "rerun `ansible-playbook playbooks/kube_scheduler.yml` (docs/runbooks.md)"


def _split(url: str) -> SplitResult:
    """``url``'s parts; an unparsable URL (``http://[::1/kube``) reads as no URL at all."""
    try:
        return urlsplit(url)
    except ValueError:
        return urlsplit("")


def mco_extender_urls(text: str | None) -> list[str]:
    """The urlPrefix of every MCO extender entry (``…/kube``) in a KubeSchedulerConfiguration's text
    (none when it is not one): the URLs the probe tries."""
    try:
        doc = yaml.safe_load(text or "")
    except yaml.YAMLError:
        return []
    return [str(e["urlPrefix"]) for e in _mco_extenders(doc)]


def mco_extender_cas(text: str | None) -> dict[str, bytes | None]:
    """urlPrefix -> the CA the entry verifies the extender with (``tlsConfig.caData``, or ``caFile`` when this
    machine can read it), None when it names none or it is unreadable here: what the probe verifies against."""
    try:
        doc = yaml.safe_load(text or "")
    except yaml.YAMLError:
        return {}
    return {str(e["urlPrefix"]): _entry_ca(e) for e in _mco_extenders(doc)}


def _entry_ca(entry: Mapping[str, Any]) -> bytes | None:
    tls = entry.get("tlsConfig")
    if not isinstance(tls, Mapping):
        return None
    data = tls.get("caData")
    if isinstance(data, str) and data:
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return None
    path = tls.get("caFile")
    if isinstance(path, str) and path:
        try:
            return Path(path).read_bytes()
        except OSError:
            return None
    return None


def kube_scheduler_checks(
    configmap: Read, files: Sequence[SchedulerFile], answers: Mapping[str, str], namespace: str = NAMESPACE
) -> Iterator[Check]:
    """One check per configuration: MCO's kube-scheduler's ConfigMap when it exists (pod network), and each
    file given (the cluster's kube-scheduler: host network). ``answers``: urlPrefix -> '' when its host and
    port answered ``/readyz`` from this machine, else why not."""
    if configmap.error:
        yield Check(
            NAME,
            Verdict.FAIL,
            f"cannot read ConfigMap {namespace}/{KUBE_SCHEDULER_CONFIGMAP}: {configmap.error}",
            "check the kubeconfig (--kubeconfig, $KUBECONFIG) and that this user may read it",
        )
    elif configmap.doc is not None:
        text = json_get(configmap.doc, "data", KUBE_SCHEDULER_CONFIGMAP_KEY)
        source = f"{namespace}/{KUBE_SCHEDULER_CONFIGMAP}"
        yield _judge(source, text if isinstance(text, str) else None, answers, host_network=False, step=ROLE_STEP)
    for file in files:
        if file.error:
            yield Check(
                NAME,
                Verdict.FAIL,
                f"{file.path}: cannot read it: {file.error}",
                "give the file kube-scheduler's --config names",
            )
            continue
        yield _judge(file.path, file.text, answers, host_network=True, step=FILE_STEP)


def _judge(source: str, text: str | None, answers: Mapping[str, str], *, host_network: bool, step: str) -> Check:
    try:
        doc = yaml.safe_load(text) if text is not None else None
    except yaml.YAMLError as exc:
        return Check(NAME, Verdict.FAIL, f"{source}: not YAML: {exc}", step)
    if not isinstance(doc, Mapping) or doc.get("kind") != "KubeSchedulerConfiguration":
        return Check(NAME, Verdict.FAIL, f"{source}: not a KubeSchedulerConfiguration", step)
    profiles = _plugin_profiles(doc)
    extenders = _mco_extenders(doc)
    if not profiles and not extenders:
        return Check(
            NAME,
            Verdict.FAIL,
            f"{source}: runs without MCO (no profile enables {PLUGIN_NAME}, no extender entry at …/kube): its pods "
            "are placed without the report",
            step,
        )
    problems: list[str] = []
    warnings: list[str] = []
    said: list[str] = []
    for profile, arguments in profiles:
        problems += plugin_argument_problems(arguments)
        said.append(f"{PLUGIN_NAME} in profile {profile}")
    for entry in extenders:
        entry_problems, entry_warnings, entry_said = _extender(entry, answers, host_network=host_network)
        problems += entry_problems
        warnings += entry_warnings
        said.append(entry_said)
    if profiles and extenders:
        warnings.append("mco-plugin and the extender both: every decision is made twice")
    if len(extenders) > 1:
        warnings.append(f"{len(extenders)} extender entries for MCO; keep one")
    detail = f"{source}: " + "; ".join(said)
    if problems:
        return Check(NAME, Verdict.FAIL, detail + " — " + "; ".join(problems + warnings), step)
    if warnings:
        return Check(NAME, Verdict.WARN, detail + " — " + "; ".join(warnings), step)
    return Check(NAME, Verdict.OK, detail)


def _extender(
    entry: Mapping[str, Any], answers: Mapping[str, str], *, host_network: bool
) -> tuple[list[str], list[str], str]:
    """(problems, warnings, what it is) of one MCO extender entry."""
    url = str(entry.get("urlPrefix"))
    parts = _split(url)
    problems = [*_address_problems(url, host_network=host_network), *_call_problems(entry)]
    ignorable = entry.get("ignorable", False)
    choice = (
        "ignorable: an unreachable extender lets pods be placed without MCO"
        if ignorable is True
        else "not ignorable: an unreachable extender holds this scheduler's pods"
    )
    answer = answers.get(url)
    if answer:
        problems.append(f"{shown_url(url)} does not answer from here ({answer})")
    reach = ", answers from here" if answer == "" else ""
    plain = ", plaintext" if parts.scheme == "http" else ""
    return problems, _tls_warnings(entry, parts.scheme), f"extender {shown_url(url)}{reach}{plain} ({choice})"


def _address_problems(url: str, *, host_network: bool) -> Iterator[str]:
    parts = _split(url)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or not host:
        yield f"urlPrefix {shown_url(url)!r} is not an http:// URL"
    if host_network and _CLUSTER_DNS.search(host):
        yield (
            f"{host} is a cluster DNS name: a kube-scheduler on the host network resolves names with the node's "
            "resolver and cannot reach it (use the Service's ClusterIP or the extender host's address)"
        )


def _call_problems(entry: Mapping[str, Any]) -> Iterator[str]:
    if entry.get("filterVerb") != "filter":
        yield f"filterVerb must be 'filter' (is {entry.get('filterVerb')!r})"
    if entry.get("prioritizeVerb", "prioritize") != "prioritize":
        yield f"prioritizeVerb must be 'prioritize' (is {entry.get('prioritizeVerb')!r})"
    weight = entry.get("weight")
    if "prioritizeVerb" in entry and not (isinstance(weight, int) and not isinstance(weight, bool) and weight > 0):
        yield f"weight must be a positive integer with prioritizeVerb (is {weight!r})"
    timeout = go_duration_seconds(entry.get("httpTimeout", "5s"))  # kube-scheduler's default: 5 s
    if timeout is None:
        yield f"httpTimeout {entry.get('httpTimeout')!r} is not a duration (e.g. 1s)"
    elif timeout < MIN_HTTP_TIMEOUT_S:
        yield f"httpTimeout {timeout:g} s is below {MIN_HTTP_TIMEOUT_S:g} s (a large prioritize call takes 0.3 s)"
    if not isinstance(entry.get("ignorable", False), bool):
        yield f"ignorable must be a YAML bool (is {entry.get('ignorable')!r})"


def _tls_warnings(entry: Mapping[str, Any], scheme: str) -> list[str]:
    """kube-scheduler's TLS settings (k8s.io/kubernetes pkg/scheduler/extender.go: enableHTTPS without a CA
    turns verification off)."""
    given = entry.get("tlsConfig")
    tls: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    https = entry.get("enableHTTPS") is True
    warnings = []
    if https and scheme == "http":
        warnings.append("enableHTTPS: true does nothing for an http:// urlPrefix (the calls are plaintext)")
    if tls.get("insecure") is True or (https and not (tls.get("caFile") or tls.get("caData"))):
        warnings.append(
            "the extender's certificate is not verified (tlsConfig.insecure, or enableHTTPS without caFile)"
        )
    return warnings


def _plugin_profiles(doc: Mapping[str, Any]) -> list[tuple[str, object]]:
    """(schedulerName, mco-plugin's args) of every profile that enables mco-plugin at some extension point."""
    found = []
    for profile in json_list(doc.get("profiles")):
        points = json_get(profile, "plugins")
        enabled = [
            json_get(p, "name")
            for point in (points.values() if isinstance(points, Mapping) else [])
            for p in json_list(json_get(point, "enabled"))
        ]
        if PLUGIN_NAME in enabled:
            configs = [c for c in json_list(json_get(profile, "pluginConfig")) if json_get(c, "name") == PLUGIN_NAME]
            name = json_get(profile, "schedulerName") or "default-scheduler"
            found.append((str(name), json_get(configs[0], "args") if configs else {}))
    return found


def _mco_extenders(doc: object) -> list[Mapping[str, Any]]:
    if not isinstance(doc, Mapping):
        return []
    entries = [e for e in json_list(doc.get("extenders")) if isinstance(e, Mapping)]
    return [e for e in entries if isinstance(e.get("urlPrefix"), str) and _OURS.search(e["urlPrefix"])]
