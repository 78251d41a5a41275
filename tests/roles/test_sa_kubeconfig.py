"""mco_sa_kubeconfig: a kubeconfig with one ServiceAccount's bounded token, kept until a third of its term is left."""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from tests.kubeapi import start

from .helpers import REPO, run


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Path]:
    server = start("127.0.0.1", 0)
    admin = server.write_kubeconfig(tmp_path / "admin.kubeconfig")
    core = client.CoreV1Api(config.new_client_from_config(str(admin)))
    core.create_namespace({"metadata": {"name": "mco-system"}})
    core.create_namespaced_service_account("mco-system", {"metadata": {"name": "mco-analyzer"}})
    yield admin
    server.stop()


def module(admin: Path, dest: Path, **args: Any) -> tuple[dict[str, Any], str]:
    params = {"kubeconfig": str(admin), "namespace": "mco-system", "service_account": "mco-analyzer",
              "dest_dir": str(dest), **args}  # fmt: skip
    proc = run(
        [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local",
         "-e", f"ansible_python_interpreter={sys.executable}",
         "-M", str(REPO / "plugins/modules"), "-m", "mco_sa_kubeconfig", "-a", json.dumps(params)],
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
    )  # fmt: skip
    doc = json.loads(proc.stdout)
    return doc["plays"][0]["tasks"][0]["hosts"]["localhost"], proc.stdout


def test_writes_keeps_and_renews_a_token_kubeconfig_without_showing_the_token(api: Path, tmp_path: Path) -> None:
    dest = tmp_path / "credentials"
    first, out = module(api, dest, expiration_seconds=3600)
    assert first["changed"], out
    assert first["renewed"], out
    path = Path(first["path"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(dest.stat().st_mode) == 0o700
    doc = yaml.safe_load(path.read_text())
    token = doc["users"][0]["user"]["token"]
    assert token not in out, "the token must never appear in the module's output"
    assert (
        doc["clusters"][0]["cluster"]["server"] == yaml.safe_load(api.read_text())["clusters"][0]["cluster"]["server"]
    )
    assert "client-certificate-data" not in path.read_text()
    assert "admin" not in path.read_text()

    kept, out = module(api, dest, expiration_seconds=3600)
    assert (kept["changed"], kept["renewed"], kept["path"]) == (False, False, first["path"]), out
    assert yaml.safe_load(path.read_text())["users"][0]["user"]["token"] == token

    # the account deleted and made again (an uninstall, then an install): its old token is refused
    core = client.CoreV1Api(config.new_client_from_config(str(api)))
    core.delete_namespaced_service_account("mco-analyzer", "mco-system")
    core.create_namespaced_service_account("mco-system", {"metadata": {"name": "mco-analyzer"}})
    remade, out = module(api, dest, expiration_seconds=3600)
    assert remade["renewed"], out
    assert yaml.safe_load(path.read_text())["users"][0]["user"]["token"] != token

    renewed, _ = module(api, dest, expiration_seconds=3600, renew=True)
    assert renewed["changed"]
    # asking for a term over three times the token's: less than a third of it is left, so it is renewed
    longer, _ = module(api, dest, expiration_seconds=3 * 3600 + 600)
    assert longer["renewed"]


def test_errors_say_what_to_fix(api: Path, tmp_path: Path) -> None:
    missing, _ = module(api, tmp_path, service_account="nobody")
    assert missing.get("failed")
    assert "does the ServiceAccount exist" in missing["msg"]
    short, _ = module(api, tmp_path, expiration_seconds=60)
    assert "at least 600" in short["msg"]
    nocfg, _ = module(tmp_path / "absent", tmp_path)
    assert "cannot load kubeconfig" in nocfg["msg"]


def test_server_as_the_control_hosts_reach_it(api: Path, tmp_path: Path) -> None:
    written, out = module(api, tmp_path / "c", server="https://api.example:6443")
    assert written["changed"], out
    doc = yaml.safe_load(Path(written["path"]).read_text())
    assert doc["clusters"][0]["cluster"]["server"] == "https://api.example:6443"
    kept, _ = module(api, tmp_path / "c", server="https://api.example:6443")
    assert not kept["changed"]
    bad, _ = module(api, tmp_path / "c", server="api.example:6443")
    assert "must be a URL" in bad["msg"]
