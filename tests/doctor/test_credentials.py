"""`mco doctor`'s credential checks: ok, warn or fail per certificate and token, each with what renews it."""

from __future__ import annotations

import datetime
import json
import math
import subprocess
from pathlib import Path

import pytest

from mco_py.doctor.checks import CredentialView, PartView, Verdict, credential_check, judge, warn_before
from mco_py.doctor.probe import probe_host
from mco_py.obs.credentials import Validity
from tests.analyzer.certs import TestCA
from tests.docs.doc_commands import select
from tests.mco_host import MCO
from tests.obs.test_credentials import jwt, kubeconfig

DAY = 86400.0
NOW = 2_000_000_000.0


def view(name: str, *, issued: float, left: float) -> CredentialView:
    return CredentialView(name, f"/etc/mco/{name}", NOW, Validity(issued, NOW + left))


@pytest.mark.parametrize(
    ("name", "issued", "left", "verdict"),
    [
        ("grpc_certificate", NOW - 200 * DAY, 165 * DAY, Verdict.OK),
        ("grpc_certificate", NOW - 328 * DAY, 37 * DAY, Verdict.OK),
        ("grpc_certificate", NOW - 329 * DAY, 36 * DAY, Verdict.WARN),  # under a tenth of 365 days
        ("kubeconfig", NOW - 76 * DAY, 14 * DAY + 60, Verdict.OK),
        ("kubeconfig", NOW - 77 * DAY, 13 * DAY, Verdict.WARN),  # under 14 days (more than a tenth of 90)
        ("grpc_certificate", NOW - 365 * DAY, -1.0, Verdict.FAIL),  # expired
        ("grpc_certificate", NOW - 365 * DAY, 0.0, Verdict.FAIL),  # expires this very second
        ("grpc_ca", NOW - 3000 * DAY, 650 * DAY, Verdict.OK),
        ("grpc_ca", NOW - 3300 * DAY, 350 * DAY, Verdict.WARN),  # a tenth of ten years: time to rotate
        ("kubeconfig", NOW - 80 * DAY, 10 * DAY, Verdict.WARN),
        ("kubeconfig", NOW - 60, 540.0, Verdict.WARN),  # a 10-minute token is always within 14 days
        ("kubeconfig", math.nan, 30 * DAY, Verdict.OK),  # no iat: 14 days only
    ],
)
def test_the_verdict_follows_the_time_left(name: str, issued: float, left: float, verdict: Verdict) -> None:
    check = credential_check("analyzer", view(name, issued=issued, left=left))
    assert check.verdict is verdict, check
    assert check.name == f"analyzer credential {name}"
    assert f"/etc/mco/{name}" in check.detail
    assert ("expired at" in check.detail) == (verdict is Verdict.FAIL)
    assert bool(check.next_step) == (verdict is not Verdict.OK)


def test_the_warning_starts_at_14_days_or_a_tenth_of_the_lifetime() -> None:
    assert warn_before(Validity(0.0, 90 * DAY)) == 14 * DAY
    assert warn_before(Validity(0.0, 3650 * DAY)) == 365 * DAY
    assert warn_before(Validity(math.nan, 3650 * DAY)) == 14 * DAY


def test_each_kind_names_what_renews_it() -> None:
    token = credential_check("extender", view("kubeconfig", issued=NOW - DAY, left=60.0))
    assert "mco_service_token_renew=true" in token.next_step
    assert "renews its own token at 80 %" in token.next_step
    cert = credential_check("collector", view("grpc_certificate", issued=NOW - DAY, left=60.0))
    assert "playbooks/mco.yml --limit" in cert.next_step
    assert "mco_pki_rotate=true" in cert.next_step
    # the service renews it; close to expiry that failed: where to see why
    assert "the collector renews its certificate itself at 2/3 of its term" in cert.next_step
    assert 'mco_collector_credential_renewals_total{result="error"}' in cert.next_step
    ca = credential_check("collector", view("grpc_ca", issued=NOW - DAY, left=60.0))
    assert "Rotate the CA" in ca.next_step
    signer = credential_check("analyzer", view("signing_ca", issued=NOW - DAY, left=60.0))
    assert "reissued by `ansible-playbook -i $INV playbooks/mco.yml --limit <this host>`" in signer.next_step
    assert "Rotate the CA" not in signer.next_step


def test_an_unreadable_file_takes_the_running_services_reading_else_fails() -> None:
    hidden = CredentialView("kubeconfig", "/etc/mco/x.kubeconfig", NOW, error="Permission denied")
    failed = credential_check("analyzer", hidden)
    assert failed.verdict is Verdict.FAIL
    assert "Permission denied" in failed.detail
    assert "run mco doctor as root" in failed.next_step
    metrics = (
        "# TYPE mco_analyzer_credential_expiry_timestamp_seconds gauge\n"
        f'mco_analyzer_credential_expiry_timestamp_seconds{{credential="kubeconfig"}} {NOW + 60 * DAY}\n'
        "# TYPE mco_analyzer_credential_issued_timestamp_seconds gauge\n"
        f'mco_analyzer_credential_issued_timestamp_seconds{{credential="kubeconfig"}} {NOW - 30 * DAY}\n'
        "# TYPE mco_build_info gauge\n"
        'mco_build_info{component="analyzer"} 1\n'
    )
    part = PartView("analyzer", 9878, port_owner_hidden=True, metrics=metrics, credentials=(hidden,))
    [check] = [c for c in judge([part]) if c.name == "analyzer credential kubeconfig"]
    assert check.verdict is Verdict.OK
    assert "in 60.0 days (as the running service reports it)" in check.detail


def configured_host(tmp_path: Path) -> Path:
    """An analyzer's and a collector's configuration naming their certificates and token (nothing runs)."""
    ca = TestCA(tmp_path, days=3650)
    now = datetime.datetime.now(datetime.UTC)
    server = ca.issue("analyzer", "ctl-1", ["ctl-1"], server=True, not_after=now + datetime.timedelta(days=5))
    client = ca.issue(
        "collector",
        "n1",
        ["n1"],
        server=False,
        not_before=now - datetime.timedelta(days=2),
        not_after=now - datetime.timedelta(hours=1),
    )
    kube = tmp_path / "analyzer.kubeconfig"
    stamp = int(now.timestamp())
    kube.write_text(kubeconfig({"token": jwt({"iat": stamp - 3600, "exp": stamp + 90 * 86400})}))
    (tmp_path / "analyzer.yaml").write_text(
        f"mode: cluster\nkubeconfig: {kube}\nlisten: 127.0.0.1:0\nmetricsHost: 127.0.0.1\nmetricsPort: 1\n"
        f"tlsCert: {server.cert}\ntlsKey: {server.key}\ntlsCa: {ca.path}\n"
    )
    (tmp_path / "collector.yaml").write_text(
        "metricsHost: 127.0.0.1\nmetricsPort: 1\nstream:\n  analyzers: ['127.0.0.1:1']\n"
        f"  tlsCa: {tmp_path / 'gone.pem'}\n  tlsCert: {client.cert}\n  tlsKey: {client.key}\n"
    )
    return tmp_path


def test_the_probe_reads_every_credential_the_parts_configuration_names(tmp_path: Path) -> None:
    views, problems, _ = probe_host(configured_host(tmp_path), timeout=0.2)
    assert problems == []
    checks = {c.name: c for c in judge(views) if " credential " in c.name}
    assert {name: c.verdict for name, c in checks.items()} == {
        "collector credential grpc_certificate": Verdict.FAIL,
        "collector credential grpc_ca": Verdict.FAIL,
        "analyzer credential grpc_certificate": Verdict.WARN,
        "analyzer credential grpc_client_ca": Verdict.OK,
        "analyzer credential kubeconfig": Verdict.OK,
    }
    assert "expired at" in checks["collector credential grpc_certificate"].detail
    assert "gone.pem: cannot read" in checks["collector credential grpc_ca"].detail
    assert "in 5.0 days" in checks["analyzer credential grpc_certificate"].detail


def test_the_runbooks_doctor_names_each_credential_and_what_renews_it(tmp_path: Path) -> None:
    """docs/runbooks.md, Credentials expire: `mco doctor` as written, pointed at this host's files."""
    [command] = select(Path(__file__).parents[2] / "docs" / "runbooks.md", "Credentials expire", r"^mco doctor$")
    args = [*MCO, *command.split()[1:], "--config-dir", str(configured_host(tmp_path)), "-o", "json"]
    out = subprocess.run([*args, "--timeout", "0.2"], capture_output=True, text=True, timeout=120, check=False)
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert out.returncode == 2  # an expired certificate
    expired = checks["collector credential grpc_certificate"]
    assert (expired["verdict"], "mco_pki_rotate=true" in expired["nextStep"]) == ("fail", True)
    assert checks["analyzer credential grpc_certificate"]["verdict"] == "warn"
    assert checks["analyzer credential kubeconfig"]["verdict"] == "ok"
