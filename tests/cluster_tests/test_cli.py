"""`python -m tests.cluster`, run as a developer would: it serves a real control plane until SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.cluster_tests.conftest import ROOT, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]


def test_serves_until_sigterm_and_binds_a_plain_pod_with_volcano(
    cluster_binaries: dict[str, Path], tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    workdir = tmp_path / "work"
    log = tmp_path / "cluster.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.cluster", "--kubeconfig", str(kubeconfig), "--nodes", "2", "--volcano",
             "--workdir", str(workdir)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_until(lambda: kubeconfig.exists() or proc.poll() is not None, "the kubeconfig", timeout=240)
        assert proc.poll() is None, log.read_text()

        def kubectl(*args: str, stdin: str | None = None) -> str:
            out = subprocess.run(
                [str(cluster_binaries["kubectl"]), f"--kubeconfig={kubeconfig}", *args],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            return out.stdout

        nodes = json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
        ready = {
            n["metadata"]["name"]: [c["status"] for c in n["status"]["conditions"] if c["type"] == "Ready"]
            for n in nodes
        }
        assert ready == {"node-1": ["True"], "node-2": ["True"]}
        assert json.loads(kubectl("version", "-o", "json"))["serverVersion"]["gitVersion"] == "v1.34.1"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "plain", "namespace": "default"},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "registry.invalid/app:1"}]},
        }
        kubectl("create", "-f", "-", stdin=yaml.safe_dump(pod))
        bound = wait_until(
            lambda: json.loads(kubectl("get", "pod", "plain", "-o", "json"))["spec"].get("nodeName"), "the binding"
        )
        assert bound in {"node-1", "node-2"}
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, log.read_text()
    assert "cluster: serving https://127.0.0.1:" in log.read_text()
    assert not workdir.exists(), "the work directory (etcd data, keys, logs) is removed"
    leftovers = subprocess.run(["pgrep", "-f", str(workdir)], capture_output=True, text=True, check=False)
    assert leftovers.stdout == "", "every component stopped"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--host", "api.example"], "--host must be an IP address"),
        (["--port", "70000"], "--port must be 1-65535"),
        (["--nodes", "-1"], "--nodes must be 0 or more"),
    ],
)
def test_bad_arguments_say_what_to_fix(args: list[str], says: str, tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tests.cluster", "--kubeconfig", str(tmp_path / "kc"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert says in out.stderr
    assert not (tmp_path / "kc").exists()
