"""The scheduler Deployment's image swap: MCO's vc-scheduler in, Volcano's own back, nothing else touched."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from scripts.build_schedulers import REGISTRY, mco_version
from tests.roles.helpers import REPO, load_module

mod = load_module("plugins/filter/volcano_scheduler.py", "volcano_scheduler")
FIXTURES = (
    Path(os.environ.get("MCO_SHARED_FIXTURES", Path(__file__).resolve().parents[3] / "shared" / "fixtures")) / "volcano"
)
OURS = "registry.example/mco/vc-scheduler:v1.14.1-mco0.1.0"
VOLCANO = "docker.io/volcanosh/vc-scheduler:v1.14.0"


def deployment(image: str = VOLCANO, policy: str = "Always") -> dict[str, Any]:
    """The installer's scheduler Deployment as the API returns it (both service-account fields set)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "volcano-scheduler", "namespace": "volcano-system", "annotations": {}},
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {"labels": {"app": "volcano-scheduler"}},
                "spec": {
                    "serviceAccount": "volcano-scheduler",
                    "serviceAccountName": "volcano-scheduler",
                    "containers": [
                        {"name": "volcano-scheduler", "image": image, "imagePullPolicy": policy, "args": ["-v=3"]}
                    ],
                },
            },
        },
    }


def apply(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """What the API server makes of the strategic-merge patch (containers merge by name, null deletes)."""
    out = copy.deepcopy(obj)
    annotations = out["metadata"].setdefault("annotations", {})
    for key, value in patch.get("metadata", {}).get("annotations", {}).items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    for change in patch.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
        next(c for c in out["spec"]["template"]["spec"]["containers"] if c["name"] == change["name"]).update(change)
    return out


def test_plugin_mode_swaps_only_the_image_and_records_it() -> None:
    before = deployment()
    patch = mod.scheduler_patch(before, OURS)
    assert patch == {
        "metadata": {
            "annotations": {"mco.many-core.io/replaced-image": VOLCANO, "mco.many-core.io/plugin-image": OURS}
        },
        "spec": {"template": {"spec": {"containers": [{"name": "volcano-scheduler", "image": OURS}]}}},
    }
    after = apply(before, patch)
    info = mod.scheduler_info(after)
    assert info["ours"]
    assert not info["stale"]
    assert (info["image"], info["volcano_image"], info["version"]) == (OURS, VOLCANO, "1.14.0")
    assert mod.scheduler_patch(after, OURS) == {}  # second run
    restored = apply(after, mod.scheduler_patch(after, ""))
    assert restored == {**before, "metadata": {**before["metadata"], "annotations": {}}}
    assert mod.scheduler_patch(restored, "") == {}


def test_an_imported_image_gets_if_not_present_and_the_policy_comes_back() -> None:
    before = deployment()
    after = apply(before, mod.scheduler_patch(before, OURS, "IfNotPresent"))
    container = after["spec"]["template"]["spec"]["containers"][0]
    assert (container["image"], container["imagePullPolicy"]) == (OURS, "IfNotPresent")
    assert after["metadata"]["annotations"]["mco.many-core.io/replaced-image-pull-policy"] == "Always"
    assert mod.scheduler_patch(after, OURS, "IfNotPresent") == {}
    # from the archive to a registry: the original policy back, its annotation gone, the image stays
    registry = apply(after, mod.scheduler_patch(after, OURS))
    assert registry["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert "mco.many-core.io/replaced-image-pull-policy" not in registry["metadata"]["annotations"]
    # and uninstall from the archive mode: image and policy back
    assert apply(after, mod.scheduler_patch(after, ""))["spec"] == before["spec"]


def test_a_new_plugin_image_keeps_the_volcano_image_it_replaced() -> None:
    first = apply(deployment(), mod.scheduler_patch(deployment(), OURS))
    newer = OURS.replace("mco0.1.0", "mco0.2.0")
    patch = mod.scheduler_patch(first, newer)
    assert patch["metadata"] == {"annotations": {"mco.many-core.io/plugin-image": newer}}
    assert mod.scheduler_info(apply(first, patch))["volcano_image"] == VOLCANO


def test_an_image_changed_by_someone_else_makes_the_annotations_stale() -> None:
    """E.g. Volcano upgraded with its installer: the image in place is Volcano's own, never replaced by ours."""
    ours = apply(deployment(), mod.scheduler_patch(deployment(), OURS, "IfNotPresent"))
    upgraded = copy.deepcopy(ours)
    upgraded["spec"]["template"]["spec"]["containers"][0]["image"] = "docker.io/volcanosh/vc-scheduler:v1.15.0"
    info = mod.scheduler_info(upgraded)
    assert (info["ours"], info["stale"], info["version"]) == (False, True, "1.15.0")
    patch = mod.scheduler_patch(upgraded, "")
    assert "spec" not in patch  # nothing to restore: the image in place is not MCO's
    assert patch["metadata"]["annotations"] == dict.fromkeys(mod.ANNOTATIONS)
    # plugin mode on it records the image in place, not the stale one
    again = mod.scheduler_patch(upgraded, OURS)
    assert again["metadata"]["annotations"]["mco.many-core.io/replaced-image"] == (
        "docker.io/volcanosh/vc-scheduler:v1.15.0"
    )
    assert again["metadata"]["annotations"]["mco.many-core.io/replaced-image-pull-policy"] is None


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("volcanosh/vc-scheduler:v1.14.1", "1.14.1"),
        ("docker.io/volcanosh/vc-scheduler:1.9.0@sha256:" + "a" * 64, "1.9.0"),
        ("volcanosh/vc-scheduler:latest", ""),
        ("registry:5000/vc-scheduler", ""),
        ("mco.many-core.io/vc-scheduler:v1.14.1-mco0.1.0", ""),  # ours says nothing of Volcano's release
    ],
)
def test_the_version_is_a_release_tag_or_nothing(image: str, version: str) -> None:
    assert mod.image_version(image) == version


def test_the_scheduler_container_and_its_service_account() -> None:
    sidecar = deployment()
    sidecar["spec"]["template"]["spec"]["containers"].insert(0, {"name": "proxy", "image": "envoy:v1.30.0"})
    del sidecar["spec"]["template"]["spec"]["serviceAccountName"]
    info = mod.scheduler_info(sidecar)
    assert info["container"] == info["service_account"] == "volcano-scheduler"
    assert info["version"] == "1.14.0"
    bare = deployment(image="example/scheduler:v2.0.0")
    del bare["spec"]["template"]["spec"]["serviceAccount"], bare["spec"]["template"]["spec"]["serviceAccountName"]
    assert mod.scheduler_info(bare)["container"] == "volcano-scheduler"  # the only one
    assert mod.scheduler_info(bare)["service_account"] == "default"  # what Kubernetes runs it as
    assert mod.scheduler_info(None)["found"] is False
    with pytest.raises(mod.VolcanoSchedulerError, match="no container"):
        mod.scheduler_patch({"metadata": {}, "spec": {"template": {"spec": {"containers": []}}}}, OURS)


@pytest.mark.parametrize("version", ["v1.9.0", "v1.12.4"])
def test_the_installers_deployment_patched_for_apply(version: str) -> None:
    path = FIXTURES / version / "volcano-development.yaml"
    if not path.exists():
        pytest.skip(f"fixture {path} not present (set MCO_SHARED_FIXTURES)")
    doc = next(
        d
        for d in yaml.safe_load_all(path.read_text())
        if d and d["kind"] == "Deployment" and d["metadata"]["name"] == "volcano-scheduler"
    )
    patched = mod.scheduler_patched(doc, OURS, "IfNotPresent")
    original = doc["spec"]["template"]["spec"]["containers"][0]
    container = patched["spec"]["template"]["spec"]["containers"][0]
    assert {k: v for k, v in container.items() if k not in ("image", "imagePullPolicy")} == {
        k: v for k, v in original.items() if k not in ("image", "imagePullPolicy")
    }
    assert patched["metadata"]["annotations"] == {
        "mco.many-core.io/replaced-image": original["image"],
        "mco.many-core.io/plugin-image": OURS,
        "mco.many-core.io/replaced-image-pull-policy": original["imagePullPolicy"],
    }
    assert mod.scheduler_patch(patched, OURS, "IfNotPresent") == {}
    assert mod.scheduler_patched(doc, "") == doc  # extender mode: applied as upstream wrote it


def test_the_roles_image_and_release_are_the_ones_the_build_makes() -> None:
    """volcano_plugin_image names what scripts/build_schedulers.py tags, for the Volcano scheduler/go.mod pins."""
    pinned = re.search(r"(?m)^\s*volcano\.sh/volcano (v[0-9.]+)$", (REPO / "scheduler" / "go.mod").read_text())
    assert pinned is not None
    defaults = yaml.safe_load((REPO / "roles" / "volcano" / "defaults" / "main.yml").read_text())
    role_vars = yaml.safe_load((REPO / "roles" / "volcano" / "vars" / "main.yml").read_text())
    assert defaults["volcano_plugin_image"] == f"{REGISTRY}/vc-scheduler:{pinned[1]}-mco{mco_version()}"
    assert pinned[1].startswith(f"v{role_vars['__volcano_plugin_series']}.")
    assert pinned[1] in defaults["volcano_version"]  # the release the role installs
    assert pinned[1] in role_vars["__volcano_known_sha256"]


TRUST_CM = "mco-extender-trust"


def test_an_https_extender_adds_mcos_ca_to_the_system_roots_and_takes_it_away_again() -> None:
    """The scheduler container trusts MCO's CA through SSL_CERT_DIR = Go's default directories plus the
    ConfigMap's mount (the system roots stay), recorded in an annotation; without trust it all goes."""
    original = deployment()
    patch = mod.scheduler_patch(original, "", "", TRUST_CM)
    assert patch["metadata"]["annotations"] == {mod.TRUST: TRUST_CM}
    pod = patch["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "mco-extender-trust", "configMap": {"name": TRUST_CM}}]
    (container,) = pod["containers"]
    assert container["env"] == [
        {"name": "SSL_CERT_DIR", "value": "/etc/ssl/certs:/etc/pki/tls/certs:/etc/mco/extender-trust"}
    ]
    assert container["volumeMounts"] == [
        {"name": "mco-extender-trust", "mountPath": "/etc/mco/extender-trust", "readOnly": True}
    ]
    assert "image" not in container  # nothing else of the container changes
    trusted = mod.scheduler_patched(original, "", "", TRUST_CM)
    info = mod.scheduler_info(trusted)
    assert (info["trust"], info["trust_ours"]) == (TRUST_CM, True)
    assert mod.scheduler_patch(trusted, "", "", TRUST_CM) == {}  # a second run changes nothing
    back = mod.scheduler_patch(trusted, "", "", "")
    (undo,) = back["spec"]["template"]["spec"]["containers"]
    assert undo["env"] == [{"name": "SSL_CERT_DIR", "$patch": "delete"}]
    assert back["metadata"]["annotations"] == {mod.TRUST: None}
    restored = mod.scheduler_patched(trusted, "", "", "")
    original["metadata"].pop("annotations")
    assert restored == original


def test_plugin_image_and_trust_are_independent() -> None:
    both = mod.scheduler_patched(deployment(), OURS, "IfNotPresent", TRUST_CM)
    assert mod.scheduler_info(both)["ours"]
    assert mod.scheduler_info(both)["trust"] == TRUST_CM
    # back to the extender over HTTPS: Volcano's image back, the trust kept
    extender = mod.scheduler_patched(both, "", "", TRUST_CM)
    assert mod.scheduler_info(extender)["image"] == VOLCANO
    assert mod.scheduler_info(extender)["trust"] == TRUST_CM


def test_a_trust_set_up_by_hand_is_kept_and_another_ssl_cert_dir_is_never_replaced() -> None:
    by_hand = mod.scheduler_patched(deployment(), "", "", TRUST_CM)
    by_hand["metadata"].pop("annotations")  # the operator applied the same patch without MCO's annotation
    assert mod.scheduler_patch(by_hand, "", "", TRUST_CM) == {}
    assert mod.scheduler_patch(by_hand, "", "", "") == {}  # MCO did not add it: MCO does not take it away
    theirs = deployment()
    theirs["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "SSL_CERT_DIR", "value": "/etc/corp-ca"}]
    with pytest.raises(mod.VolcanoSchedulerError, match=r"SSL_CERT_DIR='/etc/corp-ca'.*add /etc/mco/extender-trust"):
        mod.scheduler_patch(theirs, "", "", TRUST_CM)
