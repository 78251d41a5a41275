"""A service renews its own ServiceAccount token before it expires, with no restart and no failed call.

Against the emulated API server, which here authenticates the tokens it issues until their ``exp``
and issues them for seconds (the real one's minimum is 10 minutes): a renewal that does not happen,
or a client that keeps the old token, shows as 401s within seconds.
"""

from __future__ import annotations

import base64
import datetime
import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from prometheus_client import CollectorRegistry

from mco_py.errors import ConfigError, MCOError
from mco_py.kube.client import load_api_client
from mco_py.kube.token import TokenRenewer, account_of, renew_time, replace_token
from mco_py.obs.credentials import CredentialExpiry, CredentialFile, Validity, read_validity
from tests.kubeapi.server import EmulatedAPI, start

NS = "mco-system"
ADMIN = "admin-token"
LIFETIME = 4  # seconds: renewed after 3.2 s


def serve() -> EmulatedAPI:
    """An emulated API server with the namespace and the ServiceAccount mco-analyzer."""
    server = start(token=ADMIN, min_token_seconds=1, accept_issued_tokens=True)
    admin = client.CoreV1Api(_admin_client(server))
    admin.create_namespace({"metadata": {"name": NS}})
    admin.create_namespaced_service_account(NS, {"metadata": {"name": "mco-analyzer"}})
    return server


@pytest.fixture
def api() -> Iterator[EmulatedAPI]:
    server = serve()
    yield server
    server.stop()


def _admin_client(server: EmulatedAPI) -> client.ApiClient:
    configuration = client.Configuration()
    configuration.host = server.url
    configuration.api_key["BearerToken"] = f"Bearer {ADMIN}"
    return client.ApiClient(configuration)


def service_kubeconfig(server: EmulatedAPI, path: Path, seconds: int = LIFETIME) -> Path:
    """What the role installs: a kubeconfig with a token of ServiceAccount mco-analyzer (mode 0600)."""
    core = client.CoreV1Api(_admin_client(server))
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}}
    token = json.loads(
        core.create_namespaced_service_account_token("mco-analyzer", NS, body, _preload_content=False).data
    )
    doc = server.kubeconfig(NS)
    doc["users"][0]["user"] = {"token": token["status"]["token"]}
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


def calls_until(api_client: client.ApiClient, seconds: float) -> list[int]:
    """Read the ServiceAccount every 100 ms for ``seconds``; the HTTP status of each call."""
    core = client.CoreV1Api(api_client)
    statuses = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            core.read_namespaced_service_account("mco-analyzer", NS)
            statuses.append(200)
        except client.ApiException as exc:
            statuses.append(int(exc.status or 0))
        time.sleep(0.1)
    return statuses


def test_without_renewal_the_service_loses_the_api_server_when_its_token_expires(
    api: EmulatedAPI, tmp_path: Path
) -> None:
    statuses = calls_until(load_api_client(service_kubeconfig(api, tmp_path / "kc")), LIFETIME + 1.5)
    assert statuses[0] == 200
    assert statuses[-1] == 401


def test_the_service_renews_its_token_at_80_percent_and_never_loses_the_api_server(
    api: EmulatedAPI, tmp_path: Path
) -> None:
    path = service_kubeconfig(api, tmp_path / "kc")
    first = read_validity("kubeconfig", path)
    registry = CollectorRegistry()
    CredentialExpiry("analyzer", [CredentialFile("kubeconfig", "kubeconfig", path)], registry=registry)
    api_client = load_api_client(path)
    results: list[str] = []
    renewer = TokenRenewer(api_client, path, retry=0.2, on_result=results.append)
    assert renewer.due == pytest.approx(first.not_before + 0.8 * LIFETIME)
    renewer.start()
    try:
        statuses = calls_until(api_client, 3 * LIFETIME)  # three lifetimes: two renewals at least
    finally:
        renewer.stop()
    assert set(statuses) == {200}, statuses
    assert results.count("renewed") >= 2
    assert "error" not in results
    now = read_validity("kubeconfig", path)
    assert now.not_after >= first.not_after + 2 * 0.8 * LIFETIME - 1
    assert now.lifetime == LIFETIME  # the same lifetime as the token it replaced
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # rewritten with the mode it had
    gauge = registry.get_sample_value("mco_analyzer_credential_expiry_timestamp_seconds", {"credential": "kubeconfig"})
    assert gauge == now.not_after
    # a restart loads the renewed kubeconfig
    assert calls_until(load_api_client(path), 0.3)[0] == 200
    assert [p.name for p in tmp_path.iterdir()] == ["kc"]  # no temporary file left behind


def test_a_failed_renewal_is_retried_while_the_token_lasts(api: EmulatedAPI, tmp_path: Path) -> None:
    path = service_kubeconfig(api, tmp_path / "kc", seconds=LIFETIME)
    api_client = load_api_client(path)
    results: list[str] = []
    renewer = TokenRenewer(api_client, path, retry=0.2, on_result=results.append)
    api.fail_next(2, path=r".*/serviceaccounts/mco-analyzer/token$", method="POST", code=500)
    renewer.start()
    try:
        statuses = calls_until(api_client, LIFETIME + 1.5)
    finally:
        renewer.stop()
    assert results[:3] == ["error", "error", "renewed"]
    assert set(statuses) == {200}


def jwt(claims: dict[str, object]) -> str:
    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}."


def test_only_a_service_accounts_bound_token_is_renewed(tmp_path: Path) -> None:
    bound = {"iat": 1, "exp": 2, "kubernetes.io": {"namespace": NS, "serviceaccount": {"name": "x", "uid": "u"}}}
    assert account_of(jwt(bound)) is not None
    assert account_of(jwt({"iat": 1, "exp": 2, "sub": "admin"})) is None
    assert account_of("opaque") is None
    path = tmp_path / "kc"
    for user, says in [
        ({"token": "opaque"}, "not a ServiceAccount's bound token"),
        ({"client-certificate-data": "eA=="}, "no inline token"),
        ({"token": jwt({k: v for k, v in bound.items() if k != "iat"})}, "no 'iat'"),
    ]:
        path.write_text(
            yaml.safe_dump(
                {
                    "users": [{"name": "u", "user": user}],
                    "current-context": "x",
                    "contexts": [{"name": "x", "context": {"user": "u"}}],
                }
            )
        )
        with pytest.raises(ConfigError, match=says):
            TokenRenewer(client.ApiClient(), path)


def test_renewal_time_and_the_rewritten_document() -> None:
    assert renew_time(Validity(1000.0, 2000.0)) == 1800.0
    doc = {
        "users": [{"name": "u", "user": {"tokenFile": "/x", "token": "old"}}],
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"user": "u"}}],
    }
    assert replace_token(doc, "new")["users"][0]["user"] == {"token": "new"}
    assert doc["users"][0]["user"]["token"] == "old"  # the caller's copy is not changed


def test_an_unreachable_api_server_is_an_mco_error(tmp_path: Path) -> None:
    server = start(token=ADMIN, min_token_seconds=1, accept_issued_tokens=True)
    core = client.CoreV1Api(_admin_client(server))
    core.create_namespace({"metadata": {"name": NS}})
    core.create_namespaced_service_account(NS, {"metadata": {"name": "mco-analyzer"}})
    path = service_kubeconfig(server, tmp_path / "kc", seconds=60)
    renewer = TokenRenewer(load_api_client(path), path)
    server.stop()
    with pytest.raises(MCOError, match="TokenRequest for ServiceAccount mco-system/mco-analyzer"):
        renewer.renew()


def test_an_analyzer_left_alone_keeps_writing_its_report_past_its_first_tokens_expiry(
    api: EmulatedAPI, tmp_path: Path
) -> None:
    """`mco analyzer` in cluster mode with a 12 s token (its start may take seconds on a busy machine): it renews
    it itself; with renewal off it loses the API. The two run at once, each with an API server of its own, so the
    test waits for one expiry, not two."""
    from mco_py.model import GROUP, PLURAL, VERSION
    from tests.analyzer.test_kube import cluster_process
    from tests.contracts import crd_schema

    other = serve()
    servers = {True: api, False: other}
    admins = {renewal: _admin_client(server) for renewal, server in servers.items()}

    def written(renewal: bool) -> float:
        try:
            nir = client.CustomObjectsApi(admins[renewal]).get_cluster_custom_object(GROUP, VERSION, PLURAL, "cluster")
        except client.ApiException:
            return 0.0
        stamp = (nir.get("status") or {}).get("lastUpdateTime")  # created first, its status written next
        return float(datetime.datetime.fromisoformat(stamp).timestamp()) if stamp else 0.0

    firsts: dict[bool, Validity] = {}
    procs = {}
    fresh: dict[bool, bool] = {}
    metrics: dict[bool, str] = {}
    stopped: dict[bool, int] = {}
    try:
        for renewal, server in servers.items():
            crd = yaml.safe_load(crd_schema.CRD_PATH.read_text())
            client.ApiextensionsV1Api(admins[renewal]).create_custom_resource_definition(crd)
            path = service_kubeconfig(server, tmp_path / f"kc-{renewal}", seconds=12)
            firsts[renewal] = read_validity("kubeconfig", path)
            config = tmp_path / f"analyzer-{renewal}.yaml"
            config.write_text(f"tokenRenewal: {str(renewal).lower()}\n")
            procs[renewal] = cluster_process(path, "analyzer-1", "--config", str(config))
        for renewal, proc in procs.items():
            proc.wait_for(lambda renewal=renewal: written(renewal) > 0, f"the first report (renewal {renewal})")
        # 3 s past both first tokens' expiry
        time.sleep(max(0.0, max(first.not_after for first in firsts.values()) + 3 - time.time()))
        for renewal, proc in procs.items():
            fresh[renewal] = written(renewal) > time.time() - 2
            metrics[renewal] = proc.metrics()
    finally:
        stopped = {renewal: proc.stop() for renewal, proc in procs.items()}
        other.stop()
    assert stopped == {True: 0, False: 0}
    renewed = 'mco_analyzer_credential_renewals_total{credential="kubeconfig",result="renewed"}'
    for renewal in (True, False):
        assert fresh[renewal] is renewal, f"renewal {renewal}"
        assert (renewed in metrics[renewal]) is renewal, f"renewal {renewal}"
        gauge = float(
            metrics[renewal]
            .split('mco_analyzer_credential_expiry_timestamp_seconds{credential="kubeconfig"} ')[1]
            .split()[0]
        )
        assert (gauge > firsts[renewal].not_after) is renewal, f"renewal {renewal}"


def test_an_extender_left_alone_renews_its_token(api: EmulatedAPI, tmp_path: Path) -> None:
    """`mco extender` in cluster mode with a 12 s token (its start may take seconds on a busy machine): past the
    token's expiry it holds a renewed one."""
    import signal
    import urllib.request

    from tests.contracts import crd_schema
    from tests.extender.test_main import start as start_extender
    from tests.extender.test_main import wait_port

    admin = _admin_client(api)
    client.ApiextensionsV1Api(admin).create_custom_resource_definition(yaml.safe_load(crd_schema.CRD_PATH.read_text()))
    path = service_kubeconfig(api, tmp_path / "kc", seconds=12)
    first = read_validity("kubeconfig", path)
    config = tmp_path / "extender.yaml"
    config.write_text(f"mode: cluster\nkubeconfig: {path}\nlisten: 127.0.0.1:0\n")
    proc = start_extender(["--config", str(config)])
    try:
        port = wait_port(proc)
        time.sleep(max(0.0, first.not_after + 3 - time.time()))  # 3 s past the first token's expiry
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            metrics = resp.read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    renewals = [line for line in metrics.splitlines() if line.startswith("mco_extender_credential_renewals_total")]
    assert any('result="renewed"' in line for line in renewals), renewals
    now = read_validity("kubeconfig", path)
    assert now.not_after > first.not_after
    assert now.not_after > time.time()  # the kubeconfig on disk holds a live token
    gauge = metrics.split('mco_extender_credential_expiry_timestamp_seconds{credential="kubeconfig"} ')[1].split()[0]
    assert first.not_after < float(gauge) <= now.not_after  # the gauge followed the rewritten file
    assert proc.returncode == 0
