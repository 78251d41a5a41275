"""Small wrappers around the system tools the test-bed drives (mount, ip, processes)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from testbed.errors import TestbedError

REQUIRED_TOOLS = ("systemd-nspawn", "debootstrap", "ip", "socat", "ssh", "ssh-keygen", "mount", "umount")


def run(
    argv: Sequence[str],
    *,
    timeout: float = 60,
    check: bool = True,
    input_text: str | None = None,
    cwd: Path | None = None,
) -> str:
    """Run a fixed command; return stdout. Raise TestbedError naming the command on failure."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False, input=input_text, cwd=cwd
        )
    except FileNotFoundError as exc:
        raise TestbedError(f"{argv[0]} not found; run `make setup` as root to install the test-bed tools") from exc
    except subprocess.TimeoutExpired as exc:
        raise TestbedError(f"`{' '.join(argv)}` did not finish within {timeout:.0f} s") from exc
    if check and done.returncode != 0:
        detail = (done.stderr or done.stdout).strip()[-2000:]
        raise TestbedError(f"`{' '.join(argv)}` failed (exit {done.returncode}): {detail}")
    return done.stdout


def preflight() -> None:
    """Fail early, with the fix, when this host cannot run booted nodes."""
    if os.geteuid() != 0:
        raise TestbedError("booted test nodes need root (network namespaces, overlay mounts, systemd-nspawn)")
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        raise TestbedError(f"missing tools: {', '.join(missing)}; run `make setup` as root (requirements/debian.txt)")


def _unescape_mount_path(field: str) -> str:
    # /proc/self/mountinfo escapes space, tab, newline and backslash as octal.
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mount_points(mountinfo: Path = Path("/proc/self/mountinfo")) -> list[Path]:
    """Every mount point of this mount namespace, in mount order."""
    points = []
    for line in mountinfo.read_text().splitlines():
        fields = line.split()
        if len(fields) > 4:
            points.append(Path(_unescape_mount_path(fields[4])))
    return points


def mounts_under(root: Path, *, mountinfo: Path = Path("/proc/self/mountinfo")) -> list[Path]:
    """Mount points at or below ``root``, deepest first (the order to unmount them in)."""
    found = [p for p in mount_points(mountinfo) if p == root or root in p.parents]
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def unmount_tree(root: Path) -> None:
    """Unmount everything at or below ``root`` (lazily when busy)."""
    for point in mounts_under(root):
        if subprocess.run(["umount", str(point)], capture_output=True, check=False).returncode != 0:
            run(["umount", "--lazy", str(point)])


def remove_tree(root: Path) -> None:
    """Remove a directory tree after unmounting anything inside it; never cross into another file system."""
    if not root.exists():
        return
    unmount_tree(root)
    run(["rm", "-rf", "--one-file-system", str(root)], timeout=300)


def processes() -> Iterator[tuple[int, list[str]]]:
    """(pid, argv) of every process that is still there when read."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if raw:
            yield int(entry.name), [part.decode(errors="replace") for part in raw.rstrip(b"\0").split(b"\0")]


def spawn_detached(argv: Sequence[str], log_path: Path) -> int:
    """Start ``argv`` in its own session with output to ``log_path``; return its pid.

    The process outlives the caller (cleanup finds it by its saved pid or its command
    line). posix_spawn keeps no Popen object around that would warn about a live child.
    """
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, fd, 1),
            (os.POSIX_SPAWN_DUP2, fd, 2),
            (os.POSIX_SPAWN_CLOSE, fd),
        ]
        return os.posix_spawnp(argv[0], list(argv), os.environ, file_actions=actions, setsid=True)
    except FileNotFoundError as exc:
        raise TestbedError(f"{argv[0]} not found; run `make setup` as root to install the test-bed tools") from exc
    finally:
        os.close(fd)


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def stop_process(pid: int, *, grace: float = 10.0) -> None:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL; reap it when it is our child."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _reap(pid)
        if not pid_alive(pid):
            break
        time.sleep(0.05)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    _reap(pid)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def loopback_port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def netns_inode(name: str) -> int | None:
    """Inode of the named network namespace, or None when it does not exist."""
    try:
        return os.stat(f"/run/netns/{name}").st_ino
    except OSError:
        return None


def pids_in_netns(inode: int) -> list[int]:
    """Processes whose network namespace is the one with this inode."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.stat(entry / "ns" / "net").st_ino == inode:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def netns_names() -> list[str]:
    """Names of the network namespaces `ip netns` knows (files in /run/netns)."""
    base = Path("/run/netns")
    return sorted(p.name for p in base.iterdir()) if base.is_dir() else []
