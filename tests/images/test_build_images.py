"""scripts/build_images.py: images containerd unpacks and runs (platform, entrypoint, a non-root
user), holding every library their programs need and no other, the same bytes on every build, a
cache keyed by the scripts and the Debian package versions."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from scripts import build_images, elf
from scripts.gobuild import BuildError
from tests.images.archive import SYSTEM_DIRS, Image, read
from tests.images.readelf import readelf

ROOT = Path(__file__).resolve().parents[2]


def _elf_facts(image: Image, path: str, scratch: Path) -> elf.Dynamic:
    copy = scratch / path.replace("/", "_")
    copy.write_bytes(image.data(path))
    return readelf(copy)


def test_every_image_is_built_and_named(built: dict[str, Any]) -> None:
    assert sorted(built["images"]) == sorted(["pause", "redis", "stress-ng", "memcached"])
    for name, info in built["images"].items():
        image = read(Path(info["archive"]))
        (entry,) = image.index["manifests"]
        assert entry["annotations"]["io.containerd.image.name"] == info["image"]
        assert entry["digest"] == info["manifest"]
        assert image.manifest["config"]["digest"] == info["config"]
        (docker,) = json.loads(image.files["manifest.json"])
        assert docker["RepoTags"] == [info["image"]]
        assert info["image"].startswith(f"mco.many-core.io/test/{name}:"), info["image"]


def test_every_image_runs_its_entrypoint_as_a_non_root_user(built: dict[str, Any]) -> None:
    for name, info in built["images"].items():
        image = read(Path(info["archive"]))
        config = image.config
        assert (config["os"], config["architecture"]) == ("linux", "amd64"), "containerd unpacks only its platform"
        run = config["config"]
        program = image.resolve(run["Entrypoint"][0])
        assert program is not None, f"{name}: entrypoint {run['Entrypoint']} is not in the image"
        assert image.members[program].isfile(), f"{name}: {program}"
        assert image.members[program].mode & 0o111, f"{name}: {program} is not executable"
        m = re.fullmatch(r"(\d+):(\d+)", run["User"])
        assert m is not None, f"{name}: User {run['User']!r} is not numeric (runAsNonRoot cannot check a name)"
        assert int(m[1]) != 0, f"{name} runs as root"
        if run.get("WorkingDir"):
            assert image.members[run["WorkingDir"]].isdir(), f"{name}: WorkingDir {run['WorkingDir']}"
        if name != "pause":  # a program image names its user, so tools that look the uid up find it
            passwd = image.data("/etc/passwd").decode()
            assert f":x:{m[1]}:{m[2]}:" in passwd, passwd


def test_every_library_a_program_needs_is_in_the_image_and_no_other(built: dict[str, Any], tmp_path: Path) -> None:
    for name, info in built["images"].items():
        image = read(Path(info["archive"]))
        entry = image.resolve(image.config["config"]["Entrypoint"][0])
        assert entry is not None
        programs = [p for p, m in image.members.items() if m.isfile() and "/bin/" in p]
        todo, reached = [entry, *programs], set[str]()
        while todo:
            path = todo.pop()
            if path in reached or not image.data(path).startswith(elf.MAGIC):
                continue
            reached.add(path)
            facts = _elf_facts(image, path, tmp_path)
            if facts.interpreter:
                loader = image.resolve(facts.interpreter)
                assert loader is not None, f"{name}: {path} asks for the loader {facts.interpreter}"
                todo.append(loader)
            for library in facts.needed:
                dirs = [*facts.runpath, *SYSTEM_DIRS]
                found = next((r for d in dirs if (r := image.resolve(f"{d}/{library}")) is not None), None)
                assert found is not None, f"{name}: {path} needs {library}, in none of {dirs} in the image"
                assert image.members[found].isfile(), f"{name}: {library} -> {found}"
                todo.append(found)
        libraries = {p for p, m in image.members.items() if m.isfile() and p.startswith(("/lib", "/usr/lib"))}
        assert libraries <= reached, f"{name}: holds libraries nothing needs: {sorted(libraries - reached)}"


def test_the_redis_image_serves_a_pod_without_persistence(built: dict[str, Any]) -> None:
    image = read(Path(built["images"]["redis"]["archive"]))
    run = image.config["config"]
    assert run["Entrypoint"] == ["/usr/bin/redis-server"]
    assert run["Cmd"] == ["--protected-mode", "no", "--save", "", "--appendonly", "no", "--port", "6379"]
    assert run["ExposedPorts"] == {"6379/tcp": {}}
    uid = int(run["User"].split(":")[0])
    data = image.members[run["WorkingDir"]]
    assert (run["WorkingDir"], data.uid, data.mode & 0o700) == ("/data", uid, 0o700), "its user writes /data"
    assert image.resolve("/usr/bin/redis-cli") is not None, "a pod's probe runs redis-cli ping"
    versions = built["images"]["redis"]["packages"]
    assert built["images"]["redis"]["image"].endswith(":" + build_images.tag_of(versions["redis-server"]))


def test_the_stress_ng_image_runs_a_job_in_a_writable_directory(built: dict[str, Any]) -> None:
    image = read(Path(built["images"]["stress-ng"]["archive"]))
    run = image.config["config"]
    assert run["Entrypoint"] == ["/usr/bin/stress-ng"]
    assert image.members[run["WorkingDir"]].mode == 0o1777, "stress-ng makes its scratch files in its directory"
    versions = built["images"]["stress-ng"]["packages"]
    assert built["images"]["stress-ng"]["image"].endswith(":" + build_images.tag_of(versions["stress-ng"]))


def _kubernetes_pause_dir() -> Path:
    go = shutil.which("go")
    assert go is not None, "go is needed (the pause source is in the k8s.io/kubernetes module)"
    modcache = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    return Path(modcache) / f"k8s.io/kubernetes@{build_images.KUBERNETES}" / "build" / "pause"


def test_pause_is_kubernetes_own_program_tagged_as_its_release_tags_it(built: dict[str, Any], tmp_path: Path) -> None:
    go_mod = (ROOT / "tests/cluster/go.mod").read_text()
    assert re.search(rf"^\s*k8s.io/kubernetes {re.escape(build_images.KUBERNETES)}\b", go_mod, re.MULTILINE), (
        "the pause program comes from the kubelet's Kubernetes release (tests/cluster/go.mod)"
    )
    pause_dir = _kubernetes_pause_dir()
    tag = re.search(r"^TAG \?= (\S+)$", (pause_dir / "Makefile").read_text(), re.MULTILINE)
    assert tag is not None
    info = built["images"]["pause"]
    assert info["image"] == f"mco.many-core.io/test/pause:{tag[1]}"
    image = read(Path(info["archive"]))
    assert image.config["config"] == {"Entrypoint": ["/pause"], "User": "65535:65535"}
    program = tmp_path / "pause"
    program.write_bytes(image.data("/pause"))
    program.chmod(0o755)
    out = subprocess.run([str(program), "-v"], capture_output=True, text=True, check=True, timeout=10).stdout
    assert out == f"pause.c v{tag[1]}-{build_images.KUBERNETES}\n"


def test_a_library_no_package_has_fails_the_build_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "usr/bin").mkdir(parents=True)
    program = Path("/usr/bin/expr").read_bytes()
    assert b"libgmp.so.10\0" in program
    (root / "usr/bin/expr").write_bytes(program.replace(b"libgmp.so.10\0", b"libgmq.so.10\0"))
    package = build_images.Package("fake", "1", root)
    debian = build_images.Debian(tmp_path / "work", known={})
    tree = build_images.Tree(debian, [package])
    with pytest.raises(BuildError, match=r"/usr/bin/expr needs libgmq\.so\.10"):
        tree.add("/usr/bin/expr", package)


def test_tags_are_debian_versions_a_tag_can_hold() -> None:
    assert build_images.tag_of("5:7.0.15-1~deb12u10") == "7.0.15-1-deb12u10"
    assert build_images.tag_of("1.6.18-1+deb12u1") == "1.6.18-1-deb12u1"
    assert build_images.tag_of("0.15.06-2") == "0.15.06-2"


def test_the_cache_key_follows_the_scripts_and_the_package_versions(built: dict[str, Any]) -> None:
    inputs = {p.relative_to(ROOT).as_posix() for p in build_images.inputs()}
    assert {"scripts/build_images.py", "scripts/oci.py", "scripts/elf.py"} <= inputs
    known = build_images.versions(build_images.closure(build_images.debian_inputs()))
    assert built["dir"].name == build_images.cache_key(known)
    assert {"redis-server", "redis-tools", "stress-ng", "memcached", "gcc", "libc6-dev", "libc6"} <= set(known)
    for name, info in built["images"].items():
        for package, version in info["packages"].items():
            assert known[package][0] == version, f"{name}: {package} {version} is in the image, the key has another"
    newer = dict(known, libc6=(known["libc6"][0] + "+1", True))
    assert build_images.cache_key(newer) != build_images.cache_key(known)
    root = build_images.default_cache_root()
    env_root = os.environ.get("MCO_CACHE")
    assert root == (Path(env_root) / "images" if env_root else Path.home() / ".cache/mco/images")


def test_print_names_each_image_and_its_archive(built: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert build_images.main(["--print"]) == 0
    lines = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    for name, info in built["images"].items():
        assert lines[f"{name}-image"] == info["image"]
        assert Path(lines[f"{name}-archive"]).is_file()


@pytest.mark.slow
def test_a_build_elsewhere_makes_the_same_bytes(built: dict[str, Any], tmp_path: Path) -> None:
    again = build_images.images(cache_root=tmp_path)
    assert again["dir"].name == built["dir"].name
    for name, info in built["images"].items():
        other = again["images"][name]
        assert (other["manifest"], other["packages"]) == (info["manifest"], info["packages"]), name
        assert (
            hashlib.sha256(Path(other["archive"]).read_bytes()).digest()
            == hashlib.sha256(Path(info["archive"]).read_bytes()).digest()
        ), name
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".build-")], "the scratch directory is gone"
