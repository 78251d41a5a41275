"""A test node that is a whole machine: QEMU (TCG, no KVM) booting Debian's cloud kernel, with
pure cgroup v2 and PSI, a virtio root disk made from the booted-node image, and a second,
empty virtio disk to do block I/O on.

The node is cached in ``${MCO_CACHE:-~/.cache/mco}/vm/node-<key>``: the kernel, an initramfs
(busybox-static, the virtio modules, ``vm_init.sh`` as ``/init``) and ``root.img`` (ext4, the
tree of :func:`testbed.image.ensure_image`, with python3). ``<key>`` covers the kernel and
busybox package versions apt offers, the node image's name and the builder's sources.

A run (:func:`run`) appends a payload archive to the initramfs: a command, its environment,
files and the host's Python packages it imports (compiled here). The guest's init mounts the
root disk read-only, cgroup2 at /sys/fs/cgroup with ``+cpu +io +memory`` enabled for child
groups and the payload at /mnt, runs the command there, prints the JSON the command left in
``$MCO_VM_RESULT`` and powers off. QEMU runs under a timeout and dies with its caller; each
run's files are removed after it.
"""

from __future__ import annotations

import compileall
import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import py_compile
import re
import shutil
import struct
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testbed import cache, cpio, image, system
from testbed.errors import TestbedError

log = logging.getLogger(__name__)

QEMU = "qemu-system-x86_64"
#: Debian's metapackage for the cloud kernel (virtio drivers, cgroup v2, PSI); the build
#: downloads the image package it depends on.
KERNEL_PACKAGE = "linux-image-cloud-amd64"
BUSYBOX_PACKAGE = "busybox-static"
#: Modules the init loads (with what they depend on, in order) before it mounts the root disk.
MODULES = ("virtio_pci", "virtio_blk")
INIT_SCRIPT = Path(__file__).with_name("vm_init.sh")
#: Bumped by hand when the build changes in a way the hashed sources would not show.
NODE_FORMAT = "1"
KERNEL_ARGS = "console=ttyS0 quiet loglevel=3 panic=-1"
BUILD_TIMEOUT_SECONDS = 900
#: The guest's console lines the host reads (``vm_init.sh`` prints them).
INIT_MARK, START_MARK, RESULT_MARK, EXIT_MARK = "MCO-VM-INIT ", "MCO-VM-START ", "MCO-VM-RESULT ", "MCO-VM-EXIT "
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def cache_root() -> Path:
    """``${MCO_CACHE:-~/.cache/mco}/vm``."""
    return cache.base() / "vm"


@dataclass(frozen=True, slots=True)
class Package:
    """A Debian package at the version apt would install."""

    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name}={self.version}"


@dataclass(frozen=True, slots=True)
class Node:
    """A built node: what QEMU boots."""

    directory: Path
    kernel: Path
    initrd: Path
    root_disk: Path

    @classmethod
    def at(cls, directory: Path) -> Node:
        return cls(directory, directory / "vmlinuz", directory / "initrd", directory / "root.img")


def _apt_record(name: str) -> dict[str, str]:
    if shutil.which("apt-cache") is None:
        raise TestbedError(f"apt-cache not found: the VM node is built from Debian packages ({name})")
    text = system.run(["apt-cache", "show", "--no-all-versions", name], check=False)
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith(" "):
            fields.setdefault(key, value.strip())
    if "Version" not in fields:
        raise TestbedError(f"apt knows no package {name}; run `apt-get update` (the VM node needs it)")
    return fields


def resolve_packages() -> tuple[Package, Package]:
    """The kernel image package the cloud metapackage names now, and busybox-static."""
    meta = _apt_record(KERNEL_PACKAGE)
    first = meta.get("Depends", "").split(",")[0].split("|")[0].strip()
    match = re.fullmatch(r"(linux-image-\S+)\s*\(=\s*(\S+)\)", first)
    if match is None:
        raise TestbedError(f"{KERNEL_PACKAGE} {meta['Version']}: cannot read its kernel package from {first!r}")
    busybox = _apt_record(BUSYBOX_PACKAGE)
    return Package(match[1], match[2]), Package(BUSYBOX_PACKAGE, busybox["Version"])


def node_key(kernel: Package, busybox: Package, image_name: str) -> str:
    """Hash of everything that decides a node's content."""
    digest = hashlib.sha256()
    digest.update(f"{NODE_FORMAT}\0{kernel}\0{busybox}\0{image_name}\0".encode())
    for source in (Path(__file__), INIT_SCRIPT, Path(cpio.__file__)):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def ensure_node(*, rebuild: bool = False) -> Node:
    """The node for the current inputs, built first when missing (the booted-node image too, when
    that is missing); older nodes are removed after a build (docs/vm-node.md has the times)."""
    if os.geteuid() != 0:
        raise TestbedError("the VM node is built as root (it copies the node image, whose files root owns)")
    kernel, busybox = resolve_packages()
    tree = image.ensure_image()
    target = cache_root() / f"node-{node_key(kernel, busybox, tree.name)}"
    if target.is_dir() and not rebuild:
        return Node.at(target)
    started = time.monotonic()
    cache.build_once(target, lambda scratch: _build(scratch, kernel, busybox, tree), rebuild=rebuild)
    log.info("VM node %s ready in %.0f s", target, time.monotonic() - started)
    for old in cache.prune(cache_root(), keep=1, pattern="node-*"):
        log.info("removed an older VM node: %s", old)
    return Node.at(target)


def _build(scratch: Path, kernel: Package, busybox: Package, tree: Path) -> None:
    print(f"testbed: building the VM node ({kernel}, {busybox}, root disk from {tree.name}), once for these inputs")
    with tempfile.TemporaryDirectory(prefix="mco-vm-debs-") as tmp:
        work = Path(tmp)
        work.chmod(0o755)  # apt's download sandbox user must be able to write here
        system.run(["apt-get", "download", "-q", str(kernel), str(busybox)], timeout=BUILD_TIMEOUT_SECONDS, cwd=work)
        for deb, into in ((kernel, "kernel"), (busybox, "busybox")):
            found = sorted(work.glob(f"{deb.name}_*.deb"))
            if not found:
                raise TestbedError(f"apt-get download {deb} left no .deb in {work}")
            system.run(["dpkg-deb", "-x", str(found[0]), str(work / into)], timeout=300)
        vmlinuz = sorted((work / "kernel" / "boot").glob("vmlinuz-*"))
        if not vmlinuz:
            raise TestbedError(f"{kernel} has no /boot/vmlinuz-*")
        shutil.copyfile(vmlinuz[0], scratch / "vmlinuz")
        modules = load_order(MODULES, sorted((work / "kernel" / "lib" / "modules").glob("*/kernel/**/*.ko")))
        (scratch / "initrd").write_bytes(base_initramfs((work / "busybox" / "bin" / "busybox").read_bytes(), modules))
    _root_disk(tree, scratch / "root.img")
    inputs = {"kernel": str(kernel), "busybox": str(busybox), "image": tree.name, "modules": [m for m, _ in modules]}
    (scratch / "node.json").write_text(json.dumps(inputs, indent=2) + "\n")


def module_info(path: Path) -> dict[str, str]:
    """The ``.modinfo`` section of a kernel module (``depends``, ``name``, ``vermagic``, ...)."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise TestbedError(f"{path}: not a 64-bit ELF kernel module")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)

    def section(index: int) -> tuple[int, int, int]:
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + index * entsize)
        return name, offset, size

    names_at = section(names_index)[1]
    for index in range(count):
        name, offset, size = section(index)
        if data[names_at + name : data.index(b"\0", names_at + name)] == b".modinfo":
            pairs = (item.decode().partition("=") for item in data[offset : offset + size].split(b"\0") if item)
            return {key: value for key, _, value in pairs}
    raise TestbedError(f"{path}: no .modinfo section")


def load_order(wanted: Sequence[str], files: Sequence[Path]) -> list[tuple[str, Path]]:
    """``wanted`` modules and those they depend on, each after its dependencies."""
    by_name = {f.stem.replace("-", "_"): f for f in files}
    order: list[tuple[str, Path]] = []

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if any(name == done for done, _ in order):
            return
        if name in chain:
            raise TestbedError(f"modules depend on one another in a circle: {' -> '.join((*chain, name))}")
        if name not in by_name:
            raise TestbedError(f"kernel module {name} not in the kernel package (needed for {chain or name})")
        for dep in filter(None, module_info(by_name[name]).get("depends", "").split(",")):
            visit(dep.replace("-", "_"), (*chain, name))
        order.append((name, by_name[name]))

    for name in wanted:
        visit(name, ())
    return order


def base_initramfs(busybox: bytes, modules: Sequence[tuple[str, Path]]) -> bytes:
    """The cached part of the initramfs: busybox, the init, the modules and their load order."""
    archive = cpio.Archive()
    for name in ("bin", "dev", "proc", "sys", "newroot", "modules"):
        archive.directory(name)
    archive.char_device("dev/console", 5, 1)
    archive.file("bin/busybox", busybox, 0o755)
    archive.file("init", INIT_SCRIPT.read_bytes(), 0o755)
    for name, path in modules:
        archive.file(f"modules/{name}.ko", path.read_bytes())
    archive.file("modules/order", "".join(f"{name}\n" for name, _ in modules).encode())
    return archive.finish()


def _root_disk(tree: Path, out: Path) -> None:
    """An ext4 image of ``tree`` (mkfs.ext4 -d: no loop mount), with room for nothing more (the
    guest mounts it read-only)."""
    size = files = 0
    for directory, dirs, names in os.walk(tree):
        for name in (*dirs, *names):
            files += 1
            with contextlib.suppress(OSError):
                size += os.lstat(os.path.join(directory, name)).st_size
    mib = (size * 5 // 4) // 2**20 + 64
    system.run(
        ["mkfs.ext4", "-q", "-F", "-L", "mco-vm-root", "-O", "^has_journal", "-m", "0",
         "-N", str(files + files // 4 + 1024), "-d", str(tree), str(out), f"{mib}M"],
        timeout=BUILD_TIMEOUT_SECONDS,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Payload:
    """What one run executes in the guest (under /mnt, the guest's working directory)."""

    command: tuple[str, ...]
    """argv, run in the root disk with /mnt as the payload."""
    files: Mapping[str, Path] = field(default_factory=dict)
    """Path under /mnt -> host file or directory (copied recursively, no ``__pycache__``)."""
    python_packages: tuple[str, ...] = ()
    """Host packages (importable names) copied to /mnt/python, which is on PYTHONPATH."""
    env: Mapping[str, str] = field(default_factory=dict)

    def archive(self) -> bytes:
        """The payload as an initramfs archive of ``/payload``."""
        lines = [*self.command, *(f"{k}={v}" for k, v in self.env.items())]
        if not self.command or any("\n" in part for part in lines):
            raise TestbedError("a VM payload needs a command, and no argument or variable may hold a newline")
        bad = [k for k in self.env if not _ENV_NAME.fullmatch(k)]
        if bad:
            raise TestbedError(f"not environment variable names: {', '.join(bad)}")
        archive = cpio.Archive()
        archive.directory("payload")
        env = {"PYTHONPATH": "/mnt/python", "PYTHONDONTWRITEBYTECODE": "1", **self.env}
        archive.file("payload/env", "".join(f"{k}={v}\n" for k, v in env.items()).encode())
        archive.file("payload/command", "".join(f"{part}\n" for part in self.command).encode())
        with tempfile.TemporaryDirectory(prefix="mco-vm-payload-") as tmp:
            python = Path(tmp) / "python"
            python.mkdir()
            for name in self.python_packages:
                shutil.copytree(_package_dir(name), python / name, ignore=shutil.ignore_patterns("__pycache__"))
            # compiled once here: the guest's CPU is emulated, and the copies are this run's own
            compileall.compile_dir(
                python, quiet=1, workers=1, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
            )
            archive.tree("payload/python", python)
        for guest, host in sorted(self.files.items()):
            parts = Path(guest).parts
            if not parts or Path(guest).is_absolute() or ".." in parts or parts[0] in ("python", "env", "command"):
                raise TestbedError(f"payload path {guest!r}: use a relative path under /mnt (not python/env/command)")
            for depth in range(1, len(parts)):
                with contextlib.suppress(ValueError):  # a parent another file already added
                    archive.directory("payload/" + "/".join(parts[:depth]))
            if host.is_dir():
                archive.tree(f"payload/{guest}", host, skip=("__pycache__",))
            else:
                archive.file(f"payload/{guest}", host.read_bytes(), 0o755 if os.access(host, os.X_OK) else 0o644)
        return archive.finish()


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise TestbedError(f"{name} is not an importable package on this host (needed in the VM)")
    return Path(next(iter(spec.submodule_search_locations)))


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a run printed and returned."""

    exit: str | None
    """The command's exit status (``"0"``), a word naming what failed before it, or None when
    the guest never said (timed out, crashed)."""
    result: dict[str, object] | None
    """The JSON the command wrote to ``$MCO_VM_RESULT``."""
    console: str
    boot_seconds: float | None
    """Guest uptime when its init started (user space reached)."""
    start_seconds: float | None
    """Guest uptime when the command started."""
    wall_seconds: float
    """QEMU start to exit, on the host."""

    def checked(self) -> dict[str, object]:
        """The result; TestbedError with the console's end when the command did not succeed."""
        if self.exit != "0" or self.result is None:
            tail = "\n".join(self.console.splitlines()[-60:])
            what = "timed out or crashed" if self.exit is None else f"exit {self.exit}"
            raise TestbedError(f"VM run failed ({what}, result {'given' if self.result else 'missing'}):\n{tail}")
        return self.result


def parse_console(text: str) -> tuple[str | None, dict[str, object] | None, float | None, float | None]:
    """(exit, result, boot seconds, start seconds) from the guest's console."""
    exit_status: str | None = None
    result: dict[str, object] | None = None
    boot = start = None
    for raw in text.splitlines():
        line = raw.strip("\r")
        if line.startswith(EXIT_MARK):
            exit_status = line[len(EXIT_MARK) :].strip()
        elif line.startswith(RESULT_MARK):
            loaded = json.loads(line[len(RESULT_MARK) :])
            if not isinstance(loaded, dict):
                raise TestbedError(f"the guest's result is not a JSON object: {line[:200]}")
            result = loaded
        elif line.startswith(INIT_MARK):
            boot = float(line[len(INIT_MARK) :])
        elif line.startswith(START_MARK):
            start = float(line[len(START_MARK) :])
    return exit_status, result, boot, start


def qemu_argv(node: Node, *, initrd: Path, scratch_disk: Path, console: Path, cpus: int, memory_mib: int) -> list[str]:
    """The QEMU command line of one run."""
    return [
        QEMU, "-nodefaults", "-no-user-config", "-no-reboot",
        "-machine", "pc", "-accel", "tcg,thread=multi", "-cpu", "qemu64",
        "-smp", str(cpus), "-m", str(memory_mib),
        "-display", "none", "-monitor", "none", "-serial", f"file:{console}",
        "-kernel", str(node.kernel), "-initrd", str(initrd), "-append", KERNEL_ARGS,
        "-drive", f"file={node.root_disk},format=raw,if=virtio,readonly=on",
        "-drive", f"file={scratch_disk},format=raw,if=virtio,cache=unsafe",
    ]  # fmt: skip


def preflight() -> None:
    """Fail early, naming what is missing, when this host cannot run the VM node."""
    missing = [tool for tool in (QEMU, "setpriv", "mkfs.ext4", "apt-get", "dpkg-deb") if shutil.which(tool) is None]
    if missing:
        raise TestbedError(
            f"missing tools: {', '.join(missing)}; run `make setup` as root (requirements/debian.txt: qemu-system-x86)"
        )


def run(
    node: Node,
    payload: Payload,
    *,
    timeout: float,
    cpus: int = 2,
    memory_mib: int = 1024,
    scratch_disk_mib: int = 512,
) -> Outcome:
    """Boot ``node``, run ``payload``, return what it printed. QEMU is killed at ``timeout``
    seconds and when this process dies; the run's files are removed."""
    preflight()
    runs = cache_root() / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    clean_runs()
    work = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=runs))
    try:
        initrd = work / "initrd"
        with initrd.open("wb") as out:
            with node.initrd.open("rb") as base:
                shutil.copyfileobj(base, out)
            out.write(payload.archive())
        scratch = work / "scratch.img"
        with scratch.open("wb") as disk:
            disk.truncate(scratch_disk_mib * 2**20)
        console = work / "console.log"
        argv = qemu_argv(node, initrd=initrd, scratch_disk=scratch, console=console, cpus=cpus, memory_mib=memory_mib)
        started = time.monotonic()
        with (work / "qemu.log").open("wb") as qemu_log:
            # setpriv: QEMU gets SIGKILL when this process dies (a killed test run leaves no VM)
            proc = subprocess.Popen(
                ["setpriv", "--pdeathsig", "KILL", "--", *argv],
                stdin=subprocess.DEVNULL,
                stdout=qemu_log,
                stderr=subprocess.STDOUT,
            )
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log.warning("VM run over %.0f s: killing QEMU", timeout)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=30)
        wall = time.monotonic() - started
        text = console.read_text(errors="replace") if console.exists() else ""
        qemu_said = (work / "qemu.log").read_text(errors="replace").strip()
        if proc.returncode != 0 and qemu_said:
            text += f"\n[qemu exit {proc.returncode}] {qemu_said[-2000:]}"
        exit_status, result, boot, start = parse_console(text)
        return Outcome(exit_status, result, text, boot, start, wall)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def clean_runs() -> list[Path]:
    """Remove the files of runs whose process is gone (killed before its own cleanup)."""
    runs = cache_root() / "runs"
    removed = []
    for entry in runs.iterdir() if runs.is_dir() else ():
        pid = entry.name.split("-", 1)[0]
        if pid.isdigit() and not system.pid_alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed
