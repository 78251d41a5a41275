"""docs/security.md shows exactly the `kubectl auth can-i` table that the cluster tier checks."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import yaml

from tests.cluster_tests.identities import IDENTITIES

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(
    r"^\| `(?P<sa>mco-[a-z-]+)` \| (?P<verb>\w+) \| `(?P<res>[^`]+)` \| (?P<ns>[^|]+) \| (?P<ans>yes|no) \|$"
)


def test_can_i_table_matches_the_checked_identities() -> None:
    documented: dict[str, list[tuple[str, str, str, str]]] = {}
    for line in (ROOT / "docs" / "security.md").read_text().splitlines():
        if m := ROW.match(line):
            ns = m["ns"].strip()
            documented.setdefault(m["sa"], []).append((m["ans"], m["verb"], m["res"], "" if ns == "(cluster)" else ns))
    assert documented == IDENTITIES, "docs/security.md's can-i table differs from tests/cluster_tests/identities.py"


def _go_module(module: str) -> Path:
    """The source of ``module`` at the version scheduler/go.mod pins (from Go's module cache)."""
    go = shutil.which("go")
    assert go, "needs the go tool (make setup installs it): the scheduler module's pinned sources are read"
    run = subprocess.run(
        [go, "mod", "download", "-json", module],
        cwd=ROOT / "scheduler",
        env={**os.environ, "GOTOOLCHAIN": "local", "GOWORK": "off", "GOFLAGS": "-mod=readonly"},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, f"go mod download {module} (scheduler/): {run.stdout}{run.stderr}"
    return Path(json.loads(run.stdout)["Dir"])


def _struct_fields(go_source: str, struct: str) -> set[str]:
    body = re.search(rf"(?ms)^type {struct} struct \{{(.*?)^\}}", go_source)
    assert body, f"no struct {struct}"
    return set(re.findall(r'json:"(\w+)', body.group(1)))


def test_the_scheduler_row_says_what_each_schedulers_client_can_present() -> None:
    row = next(line for line in (ROOT / "docs" / "security.md").read_text().splitlines()
               if line.startswith("| scheduler → extender"))  # fmt: skip
    # kube-scheduler: HTTPS and a client certificate (k8s.io/kube-scheduler config/v1)
    types = (_go_module("k8s.io/kube-scheduler") / "config" / "v1" / "types.go").read_text()
    assert {"enableHTTPS", "tlsConfig"} <= _struct_fields(types, "Extender")
    tls = _struct_fields(types, "ExtenderTLSConfig")
    assert {"certFile", "keyFile", "caFile", "certData", "keyData", "caData", "insecure"} <= tls
    for field in ("enableHTTPS", "tlsConfig", "certFile", "keyFile", "caFile", "insecure"):
        assert f"`{field}" in row, f"docs/security.md does not name kube-scheduler's {field}"
    # Volcano: a bare http.Client; no argument for a CA, a client certificate or a token
    plugin = (
        _go_module("volcano.sh/volcano") / "pkg" / "scheduler" / "plugins" / "extender" / "extender.go"
    ).read_text()
    assert "http.Client{Timeout: cfg.httpTimeout}" in plugin
    assert "TLSClientConfig" not in plugin
    arguments = re.findall(r'"(extender\.\w+)"', plugin)
    assert "extender.urlPrefix" in arguments
    assert not [a for a in arguments if re.search(r"(?i)tls|cert|ca(?:File|Data)|token|auth", a)], arguments
    assert "Authorization" not in plugin
    assert "takes no CA, client certificate or token argument" in row


def test_volcano_over_https_rests_on_what_go_does() -> None:
    """docs/extender.md, "Volcano over HTTPS", and the volcano role's trust (plugins/filter/volcano_scheduler.py)
    rest on Go's own code: Volcano's client is the default Transport, a URL's user and password become
    `Authorization: Basic`, and SSL_CERT_DIR (colon-separated) replaces only the default directories, which the
    role lists before MCO's, while the bundle file is still read."""
    plugin = (
        _go_module("volcano.sh/volcano") / "pkg" / "scheduler" / "plugins" / "extender" / "extender.go"
    ).read_text()
    assert "client: http.Client{Timeout: cfg.httpTimeout}" in plugin
    assert "Transport" not in plugin
    go = shutil.which("go")
    assert go, "needs the go tool (make setup installs it)"
    goroot = Path(subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True, check=True).stdout.strip())
    client = (goroot / "src" / "net" / "http" / "client.go").read_text()
    assert re.search(r'if u := req\.URL\.User; u != nil && req\.Header\.Get\("Authorization"\) == ""', client)
    assert 'req.Header.Set("Authorization", "Basic "+basicAuth(username, password))' in client
    unix = (goroot / "src" / "crypto" / "x509" / "root_unix.go").read_text()
    assert 'certDirEnv = "SSL_CERT_DIR"' in unix
    assert 'dirs = strings.Split(d, ":")' in unix
    # the bundle file is read whatever SSL_CERT_DIR says (only SSL_CERT_FILE replaces it)
    assert re.search(r"files := certFiles\n\tif f := os\.Getenv\(certFileEnv\)", unix)
    linux = (goroot / "src" / "crypto" / "x509" / "root_linux.go").read_text()
    defaults = re.findall(r'^\t"([^"]+)",', linux.split("var certDirectories")[1].split("}")[0], re.M)
    role = (ROOT / "plugins" / "filter" / "volcano_scheduler.py").read_text()
    trust_dir = re.search(r'^TRUST_DIR = "([^"]+)"', role, re.M)
    assert trust_dir
    assert f'TRUST_CERT_DIR = f"{":".join(defaults)}:{{TRUST_DIR}}"' in role, defaults
    doc = (ROOT / "docs" / "extender.md").read_text()
    assert f"SSL_CERT_DIR={':'.join(defaults)}:{trust_dir.group(1)}" in doc


def _install_task(role: str) -> dict[str, str]:
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "configure.yml").read_text())
    task = next(t for t in tasks if t["name"] == "Install the certificate, its key and the CA")
    return task["ansible.builtin.copy"]  # type: ignore[no-any-return]


def test_the_mtls_row_states_the_key_modes_and_places_the_roles_install() -> None:
    """With host renewal (the default) a key is the service user's, 0600, in its writable directory;
    without it 0640, root and the service's group, in /etc/mco/pki: as the roles' install tasks say."""
    common = yaml.safe_load((ROOT / "roles" / "mco_common" / "defaults" / "main.yml").read_text())
    collector_user = yaml.safe_load((ROOT / "roles" / "mco_collector" / "defaults" / "main.yml").read_text())[
        "mco_collector_user"
    ]
    row = next(line for line in (ROOT / "docs" / "security.md").read_text().splitlines()
               if line.startswith("| collector → analyzer (gRPC)"))  # fmt: skip
    pki = f"{common['mco_common_config_dir']}/pki"
    places = {  # role: (user, directory with host renewal)
        "mco_collector": (collector_user, "/var/lib/mco-collector"),
        "mco_analyzer": (common["mco_common_user"], f"{common['mco_common_state_dir']}/credentials"),
    }
    for role, (user, own_dir) in places.items():
        task = _install_task(role)
        short = role.removeprefix("mco_")
        for renewal in (True, False):
            variables = {
                f"__{role}_renewal": renewal, "item": {"key": "key"}, "mco_collector_user": collector_user,
                "mco_common_setup": {"user": common["mco_common_user"]},
            }  # fmt: skip
            mode, owner, group = (
                jinja2.Template(task[field]).render(variables).strip() for field in ("mode", "owner", "group")
            )
            if renewal:
                assert owner == group == user, role
                assert f"`{own_dir}` (mode {mode}, user {owner})" in row, (role, row)
            else:
                assert owner == "root", role
                assert f"mode {mode}, {owner}:{group} ({short})" in row, (role, row)
    assert f"in `{pki}`" in row
