"""The installer manifest as the volcano role applies it: the admission webhook left out on request,
images swapped for the operator's (IfNotPresent when imported), bad entries named."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.roles.helpers import load_module

mod = load_module("plugins/filter/volcano_manifest.py", "volcano_manifest")
FIXTURES = (
    Path(os.environ.get("MCO_SHARED_FIXTURES", Path(__file__).resolve().parents[3] / "shared" / "fixtures")) / "volcano"
)
CONTROLLERS = "docker.io/volcanosh/vc-controller-manager:v1.12.4"


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    text = (FIXTURES / "v1.12.4" / "volcano-development.yaml").read_text()
    return [d for d in yaml.safe_load_all(text) if d]


def names(docs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(d["kind"], d["metadata"]["name"]) for d in docs}


def container(docs: list[dict[str, Any]], deployment: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == deployment]
    assert len(found) == 1, deployment
    first: dict[str, Any] = found[0]["spec"]["template"]["spec"]["containers"][0]
    return first


def test_defaults_apply_the_manifest_unchanged(docs: list[dict[str, Any]]) -> None:
    assert mod.manifest(docs) == docs


def test_without_admission_the_webhook_and_every_configuration_calling_it_go(docs: list[dict[str, Any]]) -> None:
    kept = mod.manifest(docs, admission=False)
    gone = names(docs) - names(kept)
    assert ("Deployment", "volcano-admission") in gone
    assert ("Job", "volcano-admission-init") in gone
    assert ("Service", "volcano-admission-service") in gone
    assert {k for k, _ in gone} >= {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ServiceAccount"}
    assert not [d for d in kept if d["kind"] in mod.WEBHOOK_KINDS]
    assert all(not n.startswith("volcano-admission") for _, n in names(kept))
    # the rest stays whole: CRDs, controllers, scheduler
    assert ("Deployment", "volcano-controllers") in names(kept)
    assert ("Deployment", "volcano-scheduler") in names(kept)
    assert sum(d["kind"] == "CustomResourceDefinition" for d in kept) == sum(
        d["kind"] == "CustomResourceDefinition" for d in docs
    )


def test_an_imported_image_runs_if_not_present_and_a_mirrored_one_keeps_the_policy(docs: list[dict[str, Any]]) -> None:
    scheduler = container(docs, "volcano-scheduler")["image"]
    kept = mod.manifest(
        docs,
        images={
            CONTROLLERS: {"image": "mco.many-core.io/test/vc-controller-manager:v1.12.4", "archive": "/x.tar"},
            scheduler: {"image": "registry.example/volcano/vc-scheduler:v1.12.4"},
        },
    )
    assert container(kept, "volcano-controllers") | {"args": None} == container(docs, "volcano-controllers") | {
        "args": None,
        "image": "mco.many-core.io/test/vc-controller-manager:v1.12.4",
        "imagePullPolicy": "IfNotPresent",
    }
    assert container(kept, "volcano-scheduler")["image"] == "registry.example/volcano/vc-scheduler:v1.12.4"
    assert (
        container(kept, "volcano-scheduler")["imagePullPolicy"]
        == container(docs, "volcano-scheduler")["imagePullPolicy"]
    )
    assert container(docs, "volcano-controllers")["image"] == CONTROLLERS  # the input is left alone


@pytest.mark.parametrize(
    ("images", "admission", "message"),
    [
        ({"docker.io/volcanosh/vc-controler-manager:v1.12.4": {"image": "x"}}, True, "does not run"),
        ({"docker.io/volcanosh/vc-webhook-manager:v1.12.4": {"image": "x"}}, False, "with volcano_admission false"),
        ({CONTROLLERS: "mco/vc-controller-manager"}, True, "must be a mapping with image"),
        ({CONTROLLERS: {"archive": "/x.tar"}}, True, "must be a mapping with image"),
        ({CONTROLLERS: {"image": "x", "archive": 3}}, True, "must be a mapping with image"),
    ],
)
def test_bad_entries_are_named(
    docs: list[dict[str, Any]], images: dict[str, Any], admission: bool, message: str
) -> None:
    with pytest.raises(mod.VolcanoManifestError, match=message) as caught:
        mod.manifest(docs, admission=admission, images=images)
    assert str(next(iter(images))) in str(caught.value)


def test_not_a_manifest_is_named() -> None:
    with pytest.raises(mod.VolcanoManifestError, match="list of Kubernetes objects"):
        mod.manifest([["not", "an", "object"]])  # type: ignore[list-item]
