"""The TCG node's parts that need no VM: the initramfs archive, module order, the console
protocol, the payload, the QEMU command line and the build cache. Booted for real: tests/vm."""

from __future__ import annotations

import json
import os
import stat
import struct
import sys
from pathlib import Path

import pytest

from testbed import cache, cli, cpio, vm
from testbed.errors import TestbedError


def read_newc(data: bytes) -> list[dict[str, object]]:
    """Entries of concatenated newc archives (zero padding between them skipped, as the kernel does)."""
    out: list[dict[str, object]] = []
    at = 0
    while at < len(data):
        if data[at] == 0:
            at += 1
            continue
        assert data[at : at + 6] == cpio.MAGIC, f"bad magic at {at}"
        fields = [int(data[at + 6 + 8 * i : at + 14 + 8 * i], 16) for i in range(13)]
        mode, size, rmajor, rminor, namesize = fields[1], fields[6], fields[9], fields[10], fields[11]
        name = data[at + 110 : at + 110 + namesize - 1].decode()
        at += 110 + namesize
        at += -at % 4
        body = data[at : at + size]
        at += size
        at += -at % 4
        out.append({"name": name, "mode": mode, "data": body, "rdev": (rmajor, rminor)})
    return out


def test_an_archive_holds_what_was_added_and_concatenates_on_block_boundaries(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "run.sh").write_text("#!/bin/sh\n")
    (tree / "sub" / "run.sh").chmod(0o755)
    (tree / "data").write_bytes(b"abc")
    (tree / "link").symlink_to("data")
    (tree / "__pycache__").mkdir()
    first = cpio.Archive()
    first.directory("dev")
    first.char_device("dev/console", 5, 1)
    first.file("/init", b"#!/bin/busybox sh\n", 0o755)
    first.tree("payload", tree, skip=("__pycache__",))
    one = first.finish()
    second = cpio.Archive()
    second.file("extra", b"12345")
    two = second.finish()
    assert len(one) % cpio.BLOCK == 0
    assert len(two) % cpio.BLOCK == 0
    entries = {e["name"]: e for e in read_newc(one + two)}
    assert list(entries) == ["dev", "dev/console", "init", "payload", "payload/data", "payload/link", "payload/sub",
                             "payload/sub/run.sh", cpio.TRAILER, "extra"]  # fmt: skip
    assert entries["dev/console"]["rdev"] == (5, 1)
    assert stat.S_ISCHR(int(str(entries["dev/console"]["mode"])))
    assert entries["init"]["mode"] == stat.S_IFREG | 0o755
    assert entries["payload/sub/run.sh"]["mode"] == stat.S_IFREG | 0o755
    assert entries["payload/data"] == {"name": "payload/data", "mode": stat.S_IFREG | 0o644, "data": b"abc",
                                       "rdev": (0, 0)}  # fmt: skip
    assert entries["payload/link"]["data"] == b"data"
    assert stat.S_ISLNK(int(str(entries["payload/link"]["mode"])))
    assert entries["extra"]["data"] == b"12345"
    assert cpio.Archive().finish() == cpio.Archive().finish(), "the same input, the same bytes"


def test_an_entry_added_twice_or_after_the_end_is_refused() -> None:
    archive = cpio.Archive()
    archive.directory("bin")
    with pytest.raises(ValueError, match="added twice"):
        archive.directory("/bin/")
    archive.finish()
    with pytest.raises(ValueError, match="already finished"):
        archive.file("late", b"")


def fake_module(path: Path, name: str, depends: str) -> Path:
    """A 64-bit ELF file with only a .modinfo section, as a kernel module has."""
    names = b"\0.shstrtab\0.modinfo\0"
    info = f"license=GPL\0depends={depends}\0name={name}\0".encode()
    names_at, info_at = 64, 64 + len(names)
    shoff = info_at + len(info) + (-(info_at + len(info)) % 8)
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64,
                                                              3, 1)  # fmt: skip
    sections = b"\0" * 64
    sections += struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, names_at, len(names), 0, 0, 1, 0)
    sections += struct.pack("<IIQQQQIIQQ", 11, 1, 0, 0, info_at, len(info), 0, 0, 1, 0)
    body = header + names + info
    path.write_bytes(body + b"\0" * (shoff - len(body)) + sections)
    return path


def test_modules_load_after_what_they_depend_on(tmp_path: Path) -> None:
    files = [
        fake_module(tmp_path / "virtio_blk.ko", "virtio_blk", "virtio,virtio_ring"),
        fake_module(tmp_path / "virtio.ko", "virtio", "virtio_ring"),
        fake_module(tmp_path / "virtio_ring.ko", "virtio_ring", ""),
        fake_module(tmp_path / "unused.ko", "unused", ""),
    ]
    assert vm.module_info(files[0])["depends"] == "virtio,virtio_ring"
    order = vm.load_order(["virtio_blk"], files)
    assert [name for name, _ in order] == ["virtio_ring", "virtio", "virtio_blk"]
    with pytest.raises(TestbedError, match="not in the kernel package"):
        vm.load_order(["virtio_net"], files)
    (tmp_path / "not.ko").write_bytes(b"MZ")
    with pytest.raises(TestbedError, match="not a 64-bit ELF"):
        vm.module_info(tmp_path / "not.ko")


def test_the_console_gives_the_exit_the_result_and_the_boot_time() -> None:
    console = (
        "[    0.000000] Linux version 6.1.0\r\n"
        "MCO-VM-INIT 1.58\r\n"
        "MCO-VM-START 1.98\n"
        "Traceback? no, the command's own output\n"
        'MCO-VM-RESULT {"cpus": [0.5, 0.25]}\n'
        "MCO-VM-EXIT 0\n"
        "[    4.7] reboot: Power down\n"
    )
    assert vm.parse_console(console) == ("0", {"cpus": [0.5, 0.25]}, 1.58, 1.98)
    assert vm.parse_console("MCO-VM-INIT 2.0\nsome panic\n") == (None, None, 2.0, None)
    with pytest.raises(TestbedError, match="not a JSON object"):
        vm.parse_console("MCO-VM-RESULT [1]\n")


def test_a_failed_run_says_why_with_the_end_of_the_console() -> None:
    bad = vm.Outcome("mount-root", None, "line\n" * 100 + "EXT4-fs: bad superblock\n", 1.5, None, 3.0)
    with pytest.raises(TestbedError, match=r"exit mount-root(.|\n)*bad superblock"):
        bad.checked()
    assert vm.Outcome("0", {"a": 1}, "", 1.5, 2.0, 3.0).checked() == {"a": 1}
    with pytest.raises(TestbedError, match="result missing"):
        vm.Outcome("0", None, "", 1.5, 2.0, 3.0).checked()


def test_a_payload_carries_its_command_files_and_compiled_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "mcoprobe"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    script = tmp_path / "main.py"
    script.write_text("print('hi')\n")
    payload = vm.Payload(command=("python3", "/mnt/tools/main.py", "a b"), files={"tools/main.py": script},
                         python_packages=("mcoprobe",), env={"MODE": "x y"})  # fmt: skip
    entries = {str(e["name"]): e for e in read_newc(payload.archive())}
    assert entries["payload/command"]["data"] == b"python3\n/mnt/tools/main.py\na b\n"
    env = bytes(entries["payload/env"]["data"]).decode().splitlines()  # type: ignore[arg-type]
    assert env == ["PYTHONPATH=/mnt/python", "PYTHONDONTWRITEBYTECODE=1", "MODE=x y"]
    assert entries["payload/tools/main.py"]["data"] == b"print('hi')\n"
    assert "payload/tools" in entries
    assert entries["payload/python/mcoprobe/__init__.py"]["data"] == b"VALUE = 1\n"
    tag = sys.implementation.cache_tag
    pyc = bytes(entries[f"payload/python/mcoprobe/__pycache__/__init__.{tag}.pyc"]["data"])  # type: ignore[arg-type]
    assert struct.unpack("<I", pyc[4:8])[0] == 1, "hash-based and unchecked: the guest never stats the source"
    assert not (package / "__pycache__").exists(), "the host's package is left as it was"


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        (vm.Payload(command=()), "needs a command"),
        (vm.Payload(command=("echo", "two\nlines")), "newline"),
        (vm.Payload(command=("true",), env={"BAD-NAME": "1"}), "not environment variable names: BAD-NAME"),
        (vm.Payload(command=("true",), files={"../up": Path("/etc/hostname")}), "relative path under /mnt"),
        (vm.Payload(command=("true",), files={"/abs": Path("/etc/hostname")}), "relative path under /mnt"),
        (vm.Payload(command=("true",), files={"python/x": Path("/etc/hostname")}), "not python/env/command"),
        (vm.Payload(command=("true",), python_packages=("no_such_package_here",)), "not an importable package"),
    ],
)
def test_a_bad_payload_is_refused_with_the_rule(payload: vm.Payload, says: str) -> None:
    with pytest.raises(TestbedError, match=says):
        payload.archive()


def test_qemu_emulates_without_kvm_and_never_writes_the_root_disk(tmp_path: Path) -> None:
    node = vm.Node.at(tmp_path)
    argv = vm.qemu_argv(node, initrd=tmp_path / "i", scratch_disk=tmp_path / "s.img", console=tmp_path / "c",
                        cpus=2, memory_mib=1024)  # fmt: skip
    assert argv[0] == vm.QEMU
    assert argv[argv.index("-accel") + 1] == "tcg,thread=multi"
    assert "-enable-kvm" not in argv
    assert f"file={tmp_path / 'root.img'},format=raw,if=virtio,readonly=on" in argv
    assert "-no-reboot" in argv, "a guest kernel panic ends QEMU"
    assert argv[argv.index("-append") + 1].startswith("console=ttyS0")


def test_the_node_key_follows_every_input() -> None:
    kernel = vm.Package("linux-image-6.1.0-57-cloud-amd64", "6.1.192-3")
    busybox = vm.Package("busybox-static", "1:1.35.0-4")
    key = vm.node_key(kernel, busybox, "image-a")
    assert key == vm.node_key(kernel, busybox, "image-a")
    assert key != vm.node_key(vm.Package(kernel.name, "6.1.193-1"), busybox, "image-a")
    assert key != vm.node_key(kernel, busybox, "image-b")
    assert str(kernel) == "linux-image-6.1.0-57-cloud-amd64=6.1.192-3", "what apt-get download takes"


def test_the_kernel_package_is_read_from_the_metapackage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = {
        "linux-image-cloud-amd64": "Package: linux-image-cloud-amd64\nVersion: 6.1.192-3\n"
        "Depends: linux-image-6.1.0-57-cloud-amd64 (= 6.1.192-3)\nDescription: x\n Depends: not this\n",
        "busybox-static": "Package: busybox-static\nVersion: 1:1.35.0-4+deb12u1+b1\n",
    }
    fake = tmp_path / "bin" / "apt-cache"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.loads({json.dumps(json.dumps(records))})"
                    ".get(sys.argv[-1], ''))\n")  # fmt: skip
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    kernel, busybox = vm.resolve_packages()
    assert kernel == vm.Package("linux-image-6.1.0-57-cloud-amd64", "6.1.192-3")
    assert busybox == vm.Package("busybox-static", "1:1.35.0-4+deb12u1+b1")
    fake.write_text(fake.read_text().replace("busybox-static", "gone"))
    with pytest.raises(TestbedError, match="apt knows no package busybox-static; run `apt-get update`"):
        vm.resolve_packages()


def test_an_artefact_is_built_once_and_an_interrupted_build_never_used(tmp_path: Path) -> None:
    calls: list[Path] = []

    def build(scratch: Path) -> None:
        calls.append(scratch)
        (scratch / "out").write_text("built")

    target = tmp_path / "vm" / "node-1"
    (tmp_path / "vm").mkdir()
    stale = tmp_path / "vm" / ".build-node-1-99999"
    stale.mkdir()
    assert cache.build_once(target, build) == target
    assert (target / "out").read_text() == "built"
    assert not stale.exists(), "an interrupted build is removed"
    cache.build_once(target, build)
    assert len(calls) == 1, "built once"

    def fail(scratch: Path) -> None:
        (scratch / "half").write_text("")
        raise TestbedError("download failed")

    with pytest.raises(TestbedError, match="download failed"):
        cache.build_once(tmp_path / "vm" / "node-2", fail)
    assert sorted(p.name for p in (tmp_path / "vm").iterdir()) == ["build.lock", "node-1"]
    cache.build_once(target, build, rebuild=True)
    assert len(calls) == 2


def test_prune_keeps_the_newest(tmp_path: Path) -> None:
    for age, name in enumerate(["node-c", "node-b", "node-a"]):
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (1000 - age, 1000 - age))
    (tmp_path / "runs").mkdir()
    assert cache.prune(tmp_path, keep=1, pattern="node-*") == [tmp_path / "node-b", tmp_path / "node-a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build.lock", "node-c", "runs"]


def test_the_cache_lives_outside_the_clone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MCO_CACHE", str(tmp_path))
    assert vm.cache_root() == tmp_path / "vm"
    monkeypatch.delenv("MCO_CACHE")
    assert vm.cache_root() == Path.home() / ".cache" / "mco" / "vm"


def test_the_cli_takes_a_vm_run_with_files_and_packages() -> None:
    args = cli.build_parser().parse_args(
        ["vm", "run", "--file", "guest.py=tests/vm/guest.py", "--python", "mco_py", "--timeout", "30", "--", "ls", "-l"]
    )
    assert (args.func, args.file, args.python, args.timeout) == (cli.cmd_vm_run, ["guest.py=tests/vm/guest.py"],
                                                                 ["mco_py"], 30.0)  # fmt: skip
    assert args.command == ["--", "ls", "-l"]
    with pytest.raises(TestbedError, match="GUEST=HOST"):
        cli.cmd_vm_run(cli.build_parser().parse_args(["vm", "run", "--file", "nohost", "--", "true"]))
    with pytest.raises(TestbedError, match="needs a command"):
        cli.cmd_vm_run(cli.build_parser().parse_args(["vm", "run"]))
