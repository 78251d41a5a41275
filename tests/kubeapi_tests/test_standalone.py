"""`python -m tests.kubeapi` as a process: from a shell, and bound inside a network namespace.

Emulator only: tests of the emulator's own command line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from tests.kubeapi_tests.conftest import ROOT

CLIENT_SCRIPT = """
import sys
from kubernetes import client, config
api = client.CoreV1Api(config.new_client_from_config(sys.argv[1]))
api.create_namespaced_config_map("default", {"metadata": {"name": "from-netns"}})
print(sorted(n.metadata.name for n in api.list_namespace().items))
print(api.read_namespaced_config_map("from-netns", "default").metadata.name)
"""


def _launch(kubeconfig: Path, *prefix: str, host: str = "127.0.0.1") -> subprocess.Popen[str]:
    argv = [
        *prefix,
        sys.executable,
        "-m",
        "tests.kubeapi",
        "--host",
        host,
        "--port",
        "0",
        "--kubeconfig",
        str(kubeconfig),
    ]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"server exited with {proc.returncode} before writing {path}: {out} {err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"server wrote no kubeconfig within {timeout}s")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return proc.returncode, out


def test_standalone_server_serves_until_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = _launch(kubeconfig)
    try:
        _wait_for(kubeconfig, proc)
        with config.new_client_from_config(str(kubeconfig)) as api_client:
            core = client.CoreV1Api(api_client)
            core.create_namespaced_config_map("default", {"metadata": {"name": "standalone"}})
            assert core.read_namespaced_config_map("standalone", "default").metadata.name == "standalone"
    finally:
        code, out = _stop(proc)
    assert code == 0
    assert "kubeapi: stopped" in out


def test_standalone_refuses_a_busy_port_with_a_clear_message(tmp_path: Path) -> None:
    first = tmp_path / "first"
    proc = _launch(first)
    try:
        _wait_for(first, proc)
        port = yaml.safe_load(first.read_text())["clusters"][0]["cluster"]["server"].rsplit(":", 1)[1]
        argv = [sys.executable, "-m", "tests.kubeapi", "--port", port, "--kubeconfig", str(tmp_path / "second")]
        second = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
        assert second.returncode == 1
        assert f"cannot bind 127.0.0.1:{port}" in second.stderr
    finally:
        _stop(proc)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def netns_pair() -> Iterator[tuple[str, str, str]]:
    """Two network namespaces joined by a veth pair: (server ns, client ns, server address)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create network namespaces (ip netns add)")
    tag = f"{os.getpid() % 10000}"
    server_ns, client_ns = f"kapi-s{tag}", f"kapi-c{tag}"
    subnet = os.getpid() % 250 + 1
    server_addr, client_addr = f"10.213.{subnet}.1", f"10.213.{subnet}.2"
    created: list[str] = []
    try:
        for ns in (server_ns, client_ns):
            try:
                _ip("netns", "add", ns)
            except subprocess.CalledProcessError as e:
                pytest.skip(f"cannot create network namespaces here: {e.stderr.strip()}")
            created.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", server_ns, "link", "add", "kapi0", "type", "veth", "peer", "name", "kapi1", "netns", client_ns)
        _ip("-n", server_ns, "addr", "add", f"{server_addr}/30", "dev", "kapi0")
        _ip("-n", client_ns, "addr", "add", f"{client_addr}/30", "dev", "kapi1")
        _ip("-n", server_ns, "link", "set", "kapi0", "up")
        _ip("-n", client_ns, "link", "set", "kapi1", "up")
        yield server_ns, client_ns, server_addr
    finally:
        for ns in created:
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
        assert not any(ns in left for ns in (server_ns, client_ns)), left


@pytest.mark.root
def test_standalone_server_inside_a_network_namespace(netns_pair: tuple[str, str, str], tmp_path: Path) -> None:
    server_ns, client_ns, server_addr = netns_pair
    kubeconfig = tmp_path / "kubeconfig"
    proc = _launch(kubeconfig, "ip", "netns", "exec", server_ns, host=server_addr)
    try:
        _wait_for(kubeconfig, proc)
        assert yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"].startswith(
            f"http://{server_addr}:"
        )
        reached = subprocess.run(
            ["ip", "netns", "exec", client_ns, sys.executable, "-c", CLIENT_SCRIPT, str(kubeconfig)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert reached.returncode == 0, reached.stderr[-2000:]
        assert reached.stdout.splitlines() == [
            "['default', 'kube-node-lease', 'kube-public', 'kube-system']",
            "from-netns",
        ]
    finally:
        code, _ = _stop(proc)
    assert code == 0
