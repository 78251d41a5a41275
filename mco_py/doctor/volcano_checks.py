"""``mco doctor --cluster`` on Volcano: its scheduler configuration names MCO (extender or mco-plugin) with
arguments MCO's own parser accepts, and runs an image that carries the plugin."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from mco_py.config.extender import SPEC as EXTENDER
from mco_py.config.loader import load
from mco_py.doctor.checks import Check, Verdict
from mco_py.doctor.cluster_view import (
    DEPLOY_STEP,
    MIN_HTTP_TIMEOUT_S,
    PLUGIN_IMAGE_ANNOTATION,
    VOLCANO_CONF_KEY,
    VOLCANO_CONFIGMAP,
    VOLCANO_DEPLOYMENT,
    VOLCANO_NAMESPACE,
    Read,
    json_get,
    json_list,
    shown_url,
    unreadable_check,
)
from mco_py.errors import ConfigError
from mco_py.extender.app import volcano_format


def volcano_checks(conf: Read, deployment: Read) -> Iterator[Check]:
    name = "volcano scheduler"
    if conf.error:
        yield unreadable_check(name, f"ConfigMap {VOLCANO_NAMESPACE}/{VOLCANO_CONFIGMAP}", conf)
        return
    if conf.doc is None:
        yield Check(name, Verdict.OK, f"no Volcano here ({VOLCANO_NAMESPACE}/{VOLCANO_CONFIGMAP} not found)")
        return
    text = json_get(conf.doc, "data", VOLCANO_CONF_KEY)
    if not isinstance(text, str):
        yield Check(name, Verdict.FAIL, f"{VOLCANO_CONFIGMAP} has no key {VOLCANO_CONF_KEY}", DEPLOY_STEP)
        return
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        yield Check(name, Verdict.FAIL, f"{VOLCANO_CONF_KEY} is not YAML: {exc}", "fix the ConfigMap by hand")
        return
    plugins = [plugin for tier in json_list(json_get(doc, "tiers")) for plugin in json_list(json_get(tier, "plugins"))]
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
    arguments = json_get(entries[0], "arguments")
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
    trust = _added_trust(deployment) if url.startswith("https://") and deployment.doc is not None else "-"
    if not trust:
        return Check(
            name,
            Verdict.WARN,
            f"extender {shown_url(url)}{version}: https://, but the scheduler container adds no CA to its system "
            "roots (no SSL_CERT_DIR naming a mounted ConfigMap or Secret, no SSL_CERT_FILE): unless the extender's "
            "certificate comes from a public CA every call fails its TLS handshake, hidden by extender.ignorable",
            f"{DEPLOY_STEP} with volcano_patch_existing_scheduler_for_https: true, or apply the patch it prints "
            '(docs/extender.md, "Volcano over HTTPS")',
        )
    trusted = f", trusting {trust}" if trust != "-" else ""
    return Check(name, Verdict.OK, f"extender {shown_url(url)}{version}{trusted}")


def _added_trust(deployment: Read) -> str:
    """Where the scheduler container finds a CA beyond the image's roots (``SSL_CERT_FILE`` or a directory of
    ``SSL_CERT_DIR`` that mounts a ConfigMap or Secret), e.g. ``ConfigMap mco-extender-trust``; '' when nowhere."""
    pod = json_get(deployment.doc, "spec", "template", "spec")
    containers = json_list(json_get(pod, "containers"))
    images = [str(json_get(c, "image") or "") for c in containers]
    container = next((c for c, i in zip(containers, images, strict=True) if "vc-scheduler" in i), None)
    container = container or (containers[0] if containers else None)
    env = {str(json_get(e, "name")): str(json_get(e, "value") or "") for e in json_list(json_get(container, "env"))}
    if env.get("SSL_CERT_FILE"):
        return f"SSL_CERT_FILE={env['SSL_CERT_FILE']}"
    volumes = {str(json_get(v, "name")): v for v in json_list(json_get(pod, "volumes"))}
    for mount in json_list(json_get(container, "volumeMounts")):
        if str(json_get(mount, "mountPath")) not in env.get("SSL_CERT_DIR", "").split(":"):
            continue
        volume = volumes.get(str(json_get(mount, "name")))
        for kind, key in (("ConfigMap", "configMap"), ("Secret", "secret")):
            source = json_get(volume, key)
            if isinstance(source, dict):
                return f"{kind} {source.get('name') or source.get('secretName')}"
    return ""


#: The plugin's name in Volcano's configuration, and the arguments it reads (docs/scheduling.md).
PLUGIN_NAME = "mco-plugin"
PLUGIN_ARGUMENTS = (
    "crName", "crStatusTTLSeconds", "fallbackWhenCROutdated", "hardConstraints", "kataRuntimeClassPrefixes",
    "scoreWeight", "unknownScore", "maxClockSkewSeconds", "herdGuard",
)  # fmt: skip
#: The herd guard's fields (plugin only: the extender sees no placements; docs/scheduling.md).
HERD_GUARD_FIELDS = ("enabled", "perPodScore", "settleSeconds", "maxAgeSeconds")
#: The tag MCO's builds of vc-scheduler carry: the Volcano release, then ``-mco<MCO version>``.
_MCO_BUILD = re.compile(r":v?\d+\.\d+\.\d+-mco[\w.]+(@.*)?$")


def _volcano_plugin(name: str, entries: list[dict[str, Any]], deployment: Read, *, extender: bool) -> Check:
    """Plugin mode: one entry, arguments the plugin takes, and a scheduler image that has the plugin."""
    problems = []
    if len(entries) > 1:
        problems.append(f"{len(entries)} mco-plugin entries; keep one")
    problems += plugin_argument_problems(json_get(entries[0], "arguments"))
    images = [
        str(json_get(c, "image") or "")
        for c in json_list(json_get(deployment.doc, "spec", "template", "spec", "containers"))
    ]
    image = next((i for i in images if "vc-scheduler" in i), images[0] if images else "")
    marked = json_get(deployment.doc, "metadata", "annotations", PLUGIN_IMAGE_ANNOTATION)
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


def plugin_argument_problems(arguments: object) -> list[str]:
    """What mco-plugin (in Volcano or kube-scheduler) would ignore or replace by its default in ``arguments``."""
    given_arguments: Mapping[str, Any] = arguments if isinstance(arguments, Mapping) else {}
    problems = []
    unknown = sorted(str(k) for k in given_arguments if k not in PLUGIN_ARGUMENTS)
    if unknown:
        problems.append(f"mco-plugin ignores the argument(s) {', '.join(unknown)}")
    herd = given_arguments.get("herdGuard")
    if herd is not None and not (isinstance(herd, Mapping) and all(k in HERD_GUARD_FIELDS for k in herd)):
        problems.append(
            f"herdGuard must be null or a mapping of {', '.join(HERD_GUARD_FIELDS)}; got {str(herd)[:60]!r}"
            " (the plugin uses the default guard instead)"
        )
    try:
        given = {k: v for k, v in given_arguments.items() if k in PLUGIN_ARGUMENTS and k != "herdGuard"}
        load(EXTENDER, document=given, source="mco-plugin arguments", strict=True)  # as the Go plugin reads them
    except ConfigError as exc:
        problems.append(f"{exc} (the plugin uses the default instead)")
    return problems


def volcano_argument_problems(arguments: Mapping[str, Any]) -> Iterator[str]:
    """What is wrong with an ``extender`` entry's arguments for MCO (docs/volcano.md)."""
    url = arguments.get("extender.urlPrefix")
    if not isinstance(url, str) or not re.match(r"^https?://[^/]+/volcano/v\d+(\.\d+)*/?$", url):
        yield f"urlPrefix {shown_url(str(url))!r} is not MCO's (http://<service>:<port>/volcano/v1.9 or /volcano/v1.10)"
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
    containers = json_list(json_get(read.doc, "spec", "template", "spec", "containers"))
    images = [str(json_get(c, "image") or "") for c in containers]
    image = next((i for i in images if "vc-scheduler" in i), images[0] if images else "")
    match = re.search(r":v?(\d+\.\d+\.\d+)(?:-mco[\w.]+)?(@.*)?$", image)
    return match[1] if match else ""
