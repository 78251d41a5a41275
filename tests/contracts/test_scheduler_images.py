"""The image archives of MCO's schedulers (scripts/build_schedulers.py) are what containerd and
docker load take: an OCI layout and a Docker manifest.json naming the same blobs, a config for
linux/amd64 with the program as entrypoint, digests that match the bytes."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

from scripts import build_schedulers, gobuild


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_an_image_archive_holds_the_program_as_its_entrypoint(tmp_path: Path) -> None:
    program = tmp_path / "vc-scheduler"
    program.write_bytes(b"\x7fELF not really a program" * 1000)
    program.chmod(0o755)
    archive = tmp_path / "image.tar"
    digests = build_schedulers.write_image(program, archive, "mco.many-core.io/vc-scheduler:v1.14.1-mco0.1.0")
    with tarfile.open(archive) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    for name, data in files.items():
        if name.startswith("blobs/sha256/"):
            assert _sha(data).split(":")[1] == name.rsplit("/", 1)[1], f"{name}: its digest is its name"
    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
    assert entry["annotations"]["io.containerd.image.name"] == "mco.many-core.io/vc-scheduler:v1.14.1-mco0.1.0"
    assert entry["digest"] == digests["manifest"]
    manifest = json.loads(files["blobs/sha256/" + entry["digest"].split(":")[1]])
    config = json.loads(files["blobs/sha256/" + manifest["config"]["digest"].split(":")[1]])
    assert (config["os"], config["architecture"]) == ("linux", "amd64"), "containerd unpacks only a matching platform"
    assert config["config"]["Entrypoint"] == ["/vc-scheduler"]
    assert config["config"]["User"] == "65532:65532"
    (layer_ref,) = manifest["layers"]
    layer = gzip.decompress(files["blobs/sha256/" + layer_ref["digest"].split(":")[1]])
    assert config["rootfs"]["diff_ids"] == [_sha(layer)] == [digests["layerDiffID"]]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        (member,) = tar.getmembers()
        assert (member.name, member.mode, member.uid) == ("vc-scheduler", 0o755, 0)
        assert tar.extractfile(member).read() == program.read_bytes()  # type: ignore[union-attr]
    (docker,) = json.loads(files["manifest.json"])
    assert docker["RepoTags"] == ["mco.many-core.io/vc-scheduler:v1.14.1-mco0.1.0"]
    assert docker["Config"] == "blobs/sha256/" + manifest["config"]["digest"].split(":")[1]


def test_the_same_program_makes_the_same_image(tmp_path: Path) -> None:
    program = tmp_path / "kube-scheduler"
    program.write_bytes(b"same bytes")
    first = build_schedulers.write_image(program, tmp_path / "a.tar", "x/kube-scheduler:1")
    second = build_schedulers.write_image(program, tmp_path / "b.tar", "x/kube-scheduler:1")
    assert first == second
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()


def test_the_cache_key_follows_the_go_sources_not_the_tests() -> None:
    inputs = {p.relative_to(build_schedulers.ROOT).as_posix() for p in build_schedulers.inputs()}
    assert "scheduler/volcano/plugin.go" in inputs
    assert "scheduler/go.sum" in inputs
    assert "mco_py/__init__.py" in inputs, "the version in the image tags"
    assert not [p for p in inputs if p.endswith("_test.go") or "/testdata/" in p]


def test_a_build_keeps_the_newest_sets_only(tmp_path: Path) -> None:
    def built(name: str, when: float) -> Path:
        d = tmp_path / name
        d.mkdir()
        (d / gobuild.MARKER).write_text("{}")
        os.utime(d / gobuild.MARKER, (when, when))
        return d

    old, older, newer, current = built("a", 100), built("b", 50), built("c", 300), built("d", 400)
    building = tmp_path / "e"
    building.mkdir()  # no marker: another process is building it
    gobuild.prune(tmp_path, keep=current, sets=2)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["c", "d", "e"]
    assert not old.exists()
    assert not older.exists()
    assert newer.exists()


def test_the_volcano_role_names_the_image_the_build_makes() -> None:
    import yaml

    defaults = yaml.safe_load((build_schedulers.ROOT / "roles/volcano/defaults/main.yml").read_text())
    version = build_schedulers.mco_version()
    assert defaults["volcano_plugin_image"] == f"{build_schedulers.REGISTRY}/vc-scheduler:v1.14.1-mco{version}"
