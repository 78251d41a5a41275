"""The images in a real containerd (Debian's, the one test nodes run): docs/images.md's commands,
word for word, build and import them, then each runs as a pod would run it.

The containerd is this module's own: root, state, socket and runc state in a scratch directory, the
native snapshotter, the containers' cgroups under a parent named for this process. Every container,
the containerd process, its shims, mounts, cgroups and the scratch directory are removed afterwards,
whatever happened.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.docs.doc_commands import select

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "images.md"
#: (heading, regex) of each docs/images.md command this module runs; together, all of them.
BUILD = ("Build", r"^python scripts/build_images\.py --print$")
IMPORT = ("Import into a node's containerd", r"^ctr -n k8s\.io images import ARCHIVE$")
LIST = ("Import into a node's containerd", r"^ctr -n k8s\.io images ls -q$")
DOC_COMMANDS = (BUILD, IMPORT, LIST)
SKIP_VARIABLE = "MCO_TEST_SKIP_CONTAINERD"
TOOLS = ("containerd", "ctr", "runc", "containerd-shim-runc-v2", "nsenter")
SHIM_SOCKETS = Path("/run/containerd")  # where containerd 1.6's shims put their sockets (fixed)
CGROUPS = Path("/sys/fs/cgroup")

pytestmark = [pytest.mark.root, pytest.mark.slow]

CONFIG = """\
version = 2
root = "{dir}/root"
state = "{dir}/state"
# the CRI plugin is the kubelet's door, not needed by ctr; snapshotters other than native are not used
disabled_plugins = [
  "io.containerd.grpc.v1.cri",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.overlayfs",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = "{dir}/containerd.sock"

[ttrpc]
  address = "{dir}/containerd.sock.ttrpc"

[debug]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{dir}/opt"
"""


def _doc_command(which: tuple[str, str], **variables: str) -> str:
    (command,) = select(DOC, which[0], which[1], variables)
    return command


@dataclass
class Containerd:
    dir: Path
    cgroup: str
    env: dict[str, str]
    containers: list[str] = field(default_factory=list)

    def ctr(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ctr", "-n", "k8s.io", *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def run(self, ref: str, cid: str, *command: str, detach: bool = False) -> subprocess.CompletedProcess[str]:
        """``ctr run`` of ``ref`` as container ``cid`` (its entrypoint, or ``command`` instead)."""
        self.containers.append(cid)
        flags = [
            "--runc-root",
            f"{self.dir}/runc",
            "--cgroup",
            f"{self.cgroup}/{cid}",
            "--fifo-dir",
            f"{self.dir}/fifo",
        ]
        flags += ["--detach", "--null-io"] if detach else ["--rm"]
        return self.ctr("run", *flags, ref, cid, *command)

    def task(self, cid: str) -> tuple[int, str]:
        """The task's host pid and status."""
        for line in self.ctr("task", "ls").stdout.splitlines()[1:]:
            name, pid, status = line.split()
            if name == cid:
                return int(pid), status
        raise AssertionError(f"no task {cid}")

    def remove(self, cid: str) -> None:
        self.ctr("task", "kill", "--signal", "SIGKILL", cid, timeout=20)
        self.ctr("task", "delete", "--force", cid, timeout=20)
        self.ctr("container", "delete", cid, timeout=20)


def _uid(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    m = re.search(r"^Uid:\s+(\d+)", status, re.MULTILINE)
    assert m is not None
    return int(m[1])


def _until(check: Any, timeout: float = 10) -> Any:
    """``check()`` until it returns something true (then that), or its last result at ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


def _prerequisites() -> None:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root")
    if missing:
        reason = (
            f"importing and running the images needs {', '.join(missing)}: `make setup` as root installs "
            f"containerd and runc (requirements/debian.txt); {SKIP_VARIABLE}=1 skips these tests"
        )
        if os.environ.get(SKIP_VARIABLE) == "1":
            pytest.skip(reason)
        pytest.fail(reason)


def _start(scratch: Path) -> subprocess.Popen[bytes]:
    (scratch / "config.toml").write_text(CONFIG.format(dir=scratch))
    with (scratch / "containerd.log").open("wb") as log:
        proc = subprocess.Popen(
            ["containerd", "--config", str(scratch / "config.toml")], stdout=log, stderr=subprocess.STDOUT
        )
    return proc


def _cleanup(daemon: Containerd, proc: subprocess.Popen[bytes], run_existed: bool) -> list[str]:
    """Remove everything the daemon made; what could not be removed."""
    left: list[str] = []
    if proc.poll() is None:
        for cid in daemon.containers:
            daemon.remove(cid)
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
    address = f"{daemon.dir}/containerd.sock"
    for entry in Path("/proc").iterdir():  # shims outlive containerd: ours name its socket
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if argv and b"containerd-shim" in argv[0] and address.encode() in argv:
            left.append(f"shim {entry.name} still running (killed)")
            os.kill(int(entry.name), signal.SIGKILL)
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(str(daemon.dir))), reverse=True):
        left.append(f"mount {mount} (unmounted)")
        subprocess.run(["umount", "--lazy", mount], check=False)
    for hierarchy in CGROUPS.iterdir():
        parent = hierarchy / daemon.cgroup
        if not parent.is_dir():
            continue
        for child in [*parent.iterdir()]:
            if child.is_dir():
                try:
                    child.rmdir()
                except OSError as exc:
                    left.append(f"cgroup {child}: {exc}")
        try:
            parent.rmdir()
        except OSError as exc:
            left.append(f"cgroup {parent}: {exc}")
    if not run_existed:  # made by the shims: gone when empty
        for directory in (SHIM_SOCKETS / "s", SHIM_SOCKETS):
            with contextlib.suppress(OSError):
                directory.rmdir()
    shutil.rmtree(daemon.dir, ignore_errors=True)
    return left


@pytest.fixture(scope="module")
def containerd() -> Iterator[Containerd]:
    _prerequisites()
    run_existed = SHIM_SOCKETS.exists()
    scratch = Path(tempfile.mkdtemp(prefix="mco-ctrd-"))  # short: a socket's path has at most 107 bytes
    env = dict(os.environ, CONTAINERD_ADDRESS=f"{scratch}/containerd.sock", CONTAINERD_SNAPSHOTTER="native")
    daemon = Containerd(scratch, f"mco-images-test-{os.getpid()}", env)
    proc = _start(scratch)
    try:
        up = _until(lambda: proc.poll() is not None or daemon.ctr("version", timeout=10).returncode == 0, timeout=30)
        if proc.poll() is not None or not up:
            log = (scratch / "containerd.log").read_text(errors="replace")[-3000:]
            pytest.fail(f"containerd did not start (exit {proc.poll()}):\n{log}")
        yield daemon
    finally:
        left = _cleanup(daemon, proc, run_existed)
    assert not left, f"left behind after the tests: {left}"


@pytest.fixture(scope="module")
def imported(containerd: Containerd) -> dict[str, str]:
    """Image name -> ref, imported into the k8s.io namespace by docs/images.md's commands."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    build = subprocess.run(
        ["bash", "-c", _doc_command(BUILD)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert build.returncode == 0, build.stderr
    printed = dict(line.split("=", 1) for line in build.stdout.splitlines())
    refs = {key.removesuffix("-image"): value for key, value in printed.items() if key.endswith("-image")}
    for name in refs:
        command = _doc_command(IMPORT, ARCHIVE=shlex.quote(printed[f"{name}-archive"]))
        imported = subprocess.run(
            ["bash", "-c", command], env=containerd.env, capture_output=True, text=True, timeout=120, check=False
        )
        assert imported.returncode == 0, f"{command}: {imported.stderr}"
    return refs


def test_the_documented_commands_import_every_image(
    imported: dict[str, str], built: dict[str, Any], containerd: Containerd
) -> None:
    assert imported == {name: info["image"] for name, info in built["images"].items()}
    listed = subprocess.run(
        ["bash", "-c", _doc_command(LIST)], env=containerd.env, capture_output=True, text=True, timeout=60, check=True
    )
    assert set(imported.values()) <= set(listed.stdout.split())


def test_pause_holds_a_sandbox_and_stops_on_sigterm(imported: dict[str, str], containerd: Containerd) -> None:
    version = containerd.run(imported["pause"], "pause-version", "/pause", "-v")
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("pause.c v"), version.stdout
    started = containerd.run(imported["pause"], "sandbox", detach=True)
    assert started.returncode == 0, started.stderr
    time.sleep(1)
    pid, status = containerd.task("sandbox")
    assert status == "RUNNING"
    assert _uid(pid) == 65535
    nspid = re.search(r"^NSpid:.*\s(\d+)$", Path(f"/proc/{pid}/status").read_text(), re.MULTILINE)
    assert nspid is not None
    assert nspid[1] == "1", "pause is its sandbox's first process"
    assert containerd.ctr("task", "kill", "--signal", "SIGTERM", "sandbox").returncode == 0
    assert _until(lambda: containerd.task("sandbox")[1] == "STOPPED"), "pause (pid 1) ignored SIGTERM"


def test_redis_answers_ping_in_its_container(
    imported: dict[str, str], built: dict[str, Any], containerd: Containerd
) -> None:
    upstream = re.match(r"(?:\d+:)?(\d+(?:\.\d+)+)", built["images"]["redis"]["packages"]["redis-server"])
    assert upstream is not None
    version = containerd.run(imported["redis"], "redis-version", "/usr/bin/redis-server", "--version")
    assert version.returncode == 0, version.stderr
    assert f"v={upstream[1]} " in version.stdout
    started = containerd.run(imported["redis"], "redis", detach=True)  # its own arguments: port 6379
    assert started.returncode == 0, started.stderr
    fifo = f"{containerd.dir}/fifo"
    attempts = iter(range(100))

    def ping() -> str:
        exec_id = f"ping-{next(attempts)}"
        probe = containerd.ctr("task", "exec", "--fifo-dir", fifo, "--exec-id", exec_id, "redis", "redis-cli", "-p",
                               "6379", "ping")  # fmt: skip
        return probe.stdout.strip()

    assert _until(lambda: ping() == "PONG"), "redis-cli ping never answered PONG"
    pid, status = containerd.task("redis")
    assert (status, _uid(pid)) == ("RUNNING", 65532)


def test_a_stress_ng_job_runs_to_completion(imported: dict[str, str], containerd: Containerd) -> None:
    job = containerd.run(imported["stress-ng"], "job", "/usr/bin/stress-ng", "--cpu", "1", "--timeout", "2s")
    assert job.returncode == 0, job.stdout + job.stderr
    assert "successful run completed" in job.stdout + job.stderr


def test_memcached_answers_version(imported: dict[str, str], containerd: Containerd) -> None:
    started = containerd.run(imported["memcached"], "memcached", detach=True)
    assert started.returncode == 0, started.stderr
    pid, _ = containerd.task("memcached")
    assert _uid(pid) == 65532
    client = (
        "import socket\n"
        "with socket.create_connection(('127.0.0.1', 11211), timeout=5) as s:\n"
        "    s.sendall(b'version\\r\\n'); print(s.recv(100).decode().strip())\n"
    )

    def version() -> str:
        argv = ["nsenter", f"--target={pid}", "--net", sys.executable, "-c", client]
        return subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False).stdout.strip()

    answer = _until(lambda: version().startswith("VERSION "))
    assert answer, f"memcached in its container's network did not answer: {version()!r}"
