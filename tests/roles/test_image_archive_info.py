"""image_archive_info: the name, digest and platform containerd records for an image archive."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from scripts.build_schedulers import write_image
from tests.roles.helpers import adhoc_json, load_module

mod = load_module("plugins/modules/image_archive_info.py", "image_archive_info")
REF = "mco.many-core.io/vc-scheduler:v1.14.1-mco0.1.0"


@pytest.fixture
def archive(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """An archive as scripts/build_schedulers.py writes it (of a stand-in program)."""
    binary = tmp_path / "vc-scheduler"
    binary.write_bytes(b"#!/bin/true\n")
    path = tmp_path / "vc-scheduler.image.tar"
    return path, write_image(binary, path, REF)


def test_the_builders_archive_names_its_image_at_the_manifest_digest(archive: tuple[Path, dict[str, str]]) -> None:
    path, digests = archive
    assert mod.read(str(path)) == [
        {
            "name": REF,
            "digest": digests["manifest"],  # what `ctr images ls/check` shows after the import
            "media_type": "application/vnd.oci.image.manifest.v1+json",
            "platforms": ["linux/amd64"],
        }
    ]


def _tar(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_platforms_come_from_the_config_or_a_nested_index(tmp_path: Path) -> None:
    def blob(doc: object) -> tuple[str, bytes]:
        data = json.dumps(doc).encode()
        return "sha256:" + hashlib.sha256(data).hexdigest(), data

    config_digest, config = blob({"os": "linux", "architecture": "arm64"})
    manifest_digest, manifest = blob({"config": {"digest": config_digest}})
    amd64 = {"digest": "x", "platform": {"os": "linux", "architecture": "amd64"}}
    nested_digest, nested = blob({"manifests": [{"digest": manifest_digest}, amd64]})
    index = {
        "manifests": [
            {"digest": manifest_digest, "annotations": {mod.NAME: "example/app:1"}},
            {"digest": nested_digest, "mediaType": mod.INDEX_TYPES[0], "annotations": {mod.NAME: "example/multi:1"}},
            {"digest": manifest_digest},  # unnamed: not listed
        ]
    }
    files = {"index.json": json.dumps(index).encode()}
    for digest, data in ((config_digest, config), (manifest_digest, manifest), (nested_digest, nested)):
        files["blobs/sha256/" + digest.split(":")[1]] = data
    images = mod.read(str(_tar(tmp_path / "a.tar", files)))
    assert [(i["name"], i["platforms"]) for i in images] == [
        ("example/app:1", ["linux/arm64"]),
        ("example/multi:1", ["linux/amd64", "linux/arm64"]),
    ]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"manifest.json": b"[]"}, "has no index.json"),  # a docker-save archive of before Docker 25
        ({"index.json": b"{"}, "is not JSON"),
        ({"index.json": b'{"manifests": [{"digest": "sha256:0"}]}'}, "names no image"),
    ],
)
def test_what_is_not_an_oci_archive_is_refused(tmp_path: Path, files: dict[str, bytes], message: str) -> None:
    with pytest.raises(mod.ArchiveError, match=message):
        mod.read(str(_tar(tmp_path / "x.tar", files)))
    with pytest.raises(mod.ArchiveError, match="cannot be read"):
        mod.read(str(tmp_path / "missing.tar"))


def test_the_module_reads_only(archive: tuple[Path, dict[str, str]]) -> None:
    path, digests = archive
    result = adhoc_json("image_archive_info", f"path={path}", "plugins/modules")
    assert result["changed"] is False
    assert result["images"][0]["digest"] == digests["manifest"]
