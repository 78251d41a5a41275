"""scripts/oci.py, the one writer of image archives: a file tree with modes, owners and links, the
run settings, the same bytes for the same entries."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from scripts import build_schedulers, oci
from tests.images.archive import read

REF = "mco.many-core.io/test/thing:1.0-1"


def _tree() -> list[oci.Entry]:
    return [
        oci.File("/usr/bin/thing", b"\x7fELF program", mode=0o755),
        oci.Symlink("/usr/bin/alias", "thing"),
        oci.Symlink("/lib64/ld.so", "/lib/x86_64-linux-gnu/ld.so"),
        oci.File("/lib/x86_64-linux-gnu/ld.so", b"loader", mode=0o755),
        oci.Dir("/data", mode=0o750, uid=65532, gid=65532),
        oci.Dir("/tmp", mode=0o1777),
        oci.File("/etc/passwd", b"root:x:0:0:root:/root:/usr/sbin/nologin\n"),
    ]


def test_the_layer_holds_the_tree_with_its_modes_owners_and_links(tmp_path: Path) -> None:
    config = oci.Config(entrypoint=("/usr/bin/thing",), user="65532:65532")
    digests = oci.write_image(_tree(), config, tmp_path / "a.tar", REF, created_by="tests")
    image = read(tmp_path / "a.tar")
    m = image.members
    assert (m["/usr/bin/thing"].mode, m["/usr/bin/thing"].uid) == (0o755, 0)
    assert image.data("/usr/bin/thing") == b"\x7fELF program"
    assert (m["/data"].isdir(), m["/data"].mode, m["/data"].uid, m["/data"].gid) == (True, 0o750, 65532, 65532)
    assert m["/tmp"].mode == 0o1777
    assert (m["/usr/bin/alias"].issym(), m["/usr/bin/alias"].linkname) == (True, "thing")
    assert image.resolve("/lib64/ld.so") == "/lib/x86_64-linux-gnu/ld.so"
    # parents no entry names: root-owned 0755 directories, each written before what is in it
    assert all(m[d].isdir() and m[d].mode == 0o755 for d in ("/usr", "/usr/bin", "/lib", "/etc", "/lib64"))
    names = [info.name for info in m.values()]  # in the layer's order
    assert names.index("usr") < names.index("usr/bin") < names.index("usr/bin/thing")
    assert {i.mtime for i in m.values()} == {0}
    assert image.config["rootfs"]["diff_ids"] == [digests["layerDiffID"]]


def test_the_order_entries_are_given_in_changes_nothing(tmp_path: Path) -> None:
    config = oci.Config(entrypoint=("/usr/bin/thing",), user="65532:65532")
    first = oci.write_image(_tree(), config, tmp_path / "a.tar", REF, created_by="tests")
    second = oci.write_image(_tree()[::-1], config, tmp_path / "b.tar", REF, created_by="tests")
    assert first == second
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()


def test_the_config_carries_what_is_set_and_nothing_else(tmp_path: Path) -> None:
    full = oci.Config(
        entrypoint=("/usr/bin/thing",),
        cmd=("--port", "6379", "--save", ""),
        user="65532:65532",
        env=("PATH=/usr/bin",),
        working_dir="/data",
        exposed_ports=("6379/tcp",),
    )
    oci.write_image(_tree(), full, tmp_path / "full.tar", REF, created_by="tests")
    config = read(tmp_path / "full.tar").config
    assert (config["os"], config["architecture"]) == ("linux", "amd64")
    assert config["config"] == {
        "Entrypoint": ["/usr/bin/thing"],
        "Cmd": ["--port", "6379", "--save", ""],
        "User": "65532:65532",
        "Env": ["PATH=/usr/bin"],
        "WorkingDir": "/data",
        "ExposedPorts": {"6379/tcp": {}},
    }
    assert config["history"] == [{"created": "1970-01-01T00:00:00Z", "created_by": "tests"}]
    bare = oci.Config(entrypoint=("/pause",), user="65535:65535")
    oci.write_image(_tree(), bare, tmp_path / "bare.tar", REF, created_by="tests")
    assert read(tmp_path / "bare.tar").config["config"] == {"Entrypoint": ["/pause"], "User": "65535:65535"}


@pytest.mark.parametrize(
    ("entries", "error"),
    [
        ([oci.File("usr/bin/x", b"")], "absolute"),
        ([oci.File("/usr/../x", b"")], "normal"),
        ([oci.File("/x/", b"")], "normal"),
        ([oci.File("/x", b""), oci.Dir("/x")], "named twice"),
        ([oci.Symlink("/lib", "usr/lib"), oci.File("/lib/x", b"")], "not a directory"),
        ([oci.File("/etc", b""), oci.File("/etc/passwd", b"")], "not a directory"),
    ],
)
def test_entries_that_are_not_one_tree_are_refused(tmp_path: Path, entries: list[oci.Entry], error: str) -> None:
    config = oci.Config(entrypoint=("/x",), user="1:1")
    with pytest.raises(oci.ImageError, match=error):
        oci.write_image(entries, config, tmp_path / "a.tar", REF, created_by="tests")
    assert not list(tmp_path.iterdir()), "nothing written"


def test_a_scheduler_image_keeps_its_bytes(tmp_path: Path) -> None:
    """A change to the writer changes every scheduler image's digest (nodes holding the old image
    import it again): this archive's sha256 is the one the schedulers' images are pinned to."""
    program = tmp_path / "tiny"
    program.write_bytes(b"\x7fELF tiny" * 100)
    archive = tmp_path / "tiny.tar"
    build_schedulers.write_image(program, archive, "mco.many-core.io/tiny:v1-mco0.1.0")
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == (
        "e91cbb1415631d6ba9eedb207fa45a6d7141b36c1af1b935469eb720240c07c9"
    )
