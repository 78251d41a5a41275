"""The roles expose TLS and basic auth of the HTTP ports (exporter-toolkit's shape): the files they render are
what the services read, the ServiceMonitors scrape with https and basic auth when on, bad inputs stop the run."""

from __future__ import annotations

import grp
import http.client
import json
import ssl
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter

from mco_py.config import analyzer, collector, extender
from mco_py.config.loader import Spec, load, parse_document
from mco_py.config.web import TLSSettings, WebSettings
from mco_py.errors import ConfigError
from mco_py.obs.metrics import serve_metrics

from .helpers import BIN, render_template, run

HASH = "$2b$10$GBZHQ539Jd2UdTQ3ZeEC9eC1unLoAQaKYDJSBdEGcaZqtx6Xoj.NG"
HOST = {"ansible_host": "10.0.0.5", "inventory_hostname": "ctl-1", "mco_insecure_plaintext_grpc": False}

Case = tuple[str, str, Spec[Any], str, str, str]
#: role, template, its service's settings, the settings' web section, the role's prefix for the port, the certificate
ROLES: list[Case] = [
    ("mco_collector", "collector.yaml.j2", collector.SPEC, "metrics_web", "mco_collector_metrics", "collector-metrics"),
    ("mco_analyzer", "analyzer.yaml.j2", analyzer.SPEC, "metrics_web", "mco_analyzer_metrics", "analyzer-metrics"),
    ("mco_scheduler_extender", "extender.yaml.j2", extender.SPEC, "web", "mco_scheduler_extender", "extender"),
]


def _rendered(tmp_path: Path, role: str, template: str, spec: Spec[Any], variables: dict[str, object]) -> Any:
    text = render_template(role, template, tmp_path / template.removesuffix(".j2"), {**HOST, **variables})
    loaded = load(spec, document=parse_document(text, template), source=template)
    assert loaded.notes == ()
    return loaded.settings


@pytest.mark.parametrize("case", ROLES, ids=[case[0] for case in ROLES])
def test_the_roles_render_tls_and_basic_auth_the_services_read(tmp_path: Path, case: Case) -> None:
    role, template, spec, section, prefix, component = case
    settings = _rendered(
        tmp_path,
        role,
        template,
        spec,
        {
            f"{prefix}_tls_pki": True,
            f"{prefix}_tls_server_config": {
                "client_auth_type": "RequireAndVerifyClientCert",
                "client_ca_file": "/etc/mco/pki/ca.pem",
                "min_version": "TLS13",
            },
            f"{prefix}_basic_auth_users": {"prometheus": HASH},
        },
    )
    web: WebSettings = getattr(settings, section)
    assert str(web.tls.cert_file) == f"/etc/mco/pki/{component}.pem"
    assert str(web.tls.key_file) == f"/etc/mco/pki/{component}-key.pem"
    assert (web.tls.client_auth_type, str(web.tls.client_ca_file), web.tls.min_version) == (
        "RequireAndVerifyClientCert",
        "/etc/mco/pki/ca.pem",
        "TLS13",
    )
    assert web.basic_auth_users == {"prometheus": HASH}


@pytest.mark.parametrize("case", ROLES, ids=[case[0] for case in ROLES])
def test_by_default_the_ports_ask_for_nothing_and_the_operators_files_are_used_as_given(
    tmp_path: Path, case: Case
) -> None:
    role, template, spec, section, prefix, _ = case
    assert getattr(_rendered(tmp_path, role, template, spec, {}), section) == WebSettings()
    settings = _rendered(
        tmp_path,
        role,
        template,
        spec,
        {f"{prefix}_tls_server_config": {"cert_file": "/srv/a.pem", "key_file": "/srv/a.key"}},
    )
    web: WebSettings = getattr(settings, section)
    assert (str(web.tls.cert_file), str(web.tls.key_file), web.basic_auth_users) == ("/srv/a.pem", "/srv/a.key", {})


def test_play_level_metrics_settings_reach_both_metrics_ports(tmp_path: Path) -> None:
    play = {"mco_metrics_tls_pki": True, "mco_metrics_basic_auth_users": {"prometheus": HASH}}
    for role, template, spec, section, _, component in ROLES[:2]:
        web: WebSettings = getattr(_rendered(tmp_path, role, template, spec, play), section)
        assert str(web.tls.cert_file) == f"/etc/mco/pki/{component}.pem"
        assert web.basic_auth_users == {"prometheus": HASH}
    extender_web = _rendered(tmp_path, "mco_scheduler_extender", "extender.yaml.j2", extender.SPEC, play).web
    assert extender_web == WebSettings()  # the extender's port has its own settings


def _monitors(tmp_path: Path, variables: dict[str, object]) -> dict[str, dict[str, Any]]:
    text = render_template("mco_crds", "servicemonitors.yaml.j2", tmp_path / "monitors.yaml", variables)
    return {doc["metadata"]["name"]: doc["spec"]["endpoints"][0] for doc in yaml.safe_load_all(text) if doc}


def test_servicemonitors_scrape_with_https_and_basic_auth_when_on(tmp_path: Path) -> None:
    plain = _monitors(tmp_path, {})
    assert all("scheme" not in e and "basicAuth" not in e for e in plain.values())
    on = _monitors(
        tmp_path,
        {
            "mco_metrics_tls_pki": True,
            "mco_metrics_basic_auth_users": {"prometheus": HASH},
            "mco_crds_scrape_cert_file": "/home/op/prometheus.pem",
            "mco_crds_scrape_key_file": "/home/op/prometheus-key.pem",
        },
    )
    secret = {"name": "mco-metrics-scrape"}
    for name in ("mco-collector", "mco-analyzer"):
        assert on[name]["scheme"] == "https"
        assert on[name]["tlsConfig"] == {
            "ca": {"secret": {**secret, "key": "ca.crt"}},
            "cert": {"secret": {**secret, "key": "tls.crt"}},
            "keySecret": {**secret, "key": "tls.key"},
        }
        assert on[name]["basicAuth"] == {
            "username": {**secret, "key": "username"},
            "password": {**secret, "key": "password"},
        }
    assert "scheme" not in on["mco-scheduler-extender"]
    extender_on = _monitors(tmp_path, {"mco_scheduler_extender_tls_pki": True})["mco-scheduler-extender"]
    assert extender_on["scheme"] == "https"
    assert extender_on["tlsConfig"] == {"ca": {"secret": {**secret, "key": "ca.crt"}}}


def test_the_scrape_secret_holds_what_prometheus_presents(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    text = render_template(
        "mco_crds",
        "scrape-secret.yaml.j2",
        tmp_path / "secret.yaml",
        {"mco_metrics_tls_pki": True, "mco_crds_scrape_ca_file": str(ca), "mco_crds_scrape_username": "prometheus",
         "mco_crds_scrape_password": "pw: with \"quotes\""},
    )  # fmt: skip
    secret = yaml.safe_load(text)
    assert secret["stringData"] == {
        "ca.crt": ca.read_text().rstrip("\n"),
        "username": "prometheus",
        "password": 'pw: with "quotes"',
    }


PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Check
      ansible.builtin.include_role:
        name: manycore.mco.mco_common
        tasks_from: web_check
      vars:
        mco_common_web_name: the extender's port
"""


@pytest.mark.parametrize(
    ("tls", "users", "message"),
    [
        ({"cert_file": "/a.pem"}, {}, "set cert_file and key_file together"),
        ({"cert_file": "/a", "key_file": "/b", "client_auth_type": "RequireAnyClientCert"}, {},
         "client_auth_type 'RequireAnyClientCert' must be one of NoClientCert"),
        ({"cert_file": "/a", "key_file": "/b", "client_auth_type": "RequireAndVerifyClientCert"}, {},
         "client_auth_type RequireAndVerifyClientCert needs client_ca_file"),
        ({"certfile": "/a"}, {}, "the TLS keys ['certfile'] must be some of cert_file, key_file"),
        ({}, {"prometheus": "hunter2", "ok": HASH}, "not a password (these are not: ['prometheus'])"),
    ],
)  # fmt: skip
def test_bad_tls_or_basic_auth_inputs_stop_the_run_naming_them(
    tmp_path: Path, tls: dict[str, str], users: dict[str, str], message: str
) -> None:
    playbook = tmp_path / "check.yml"
    playbook.write_text(PLAYBOOK)
    extra = json.dumps({"mco_common_web_tls": tls, "mco_common_web_users": users})
    proc = run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook), "-e", extra])
    output = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, output[-2000:]
    assert "Bad TLS or basic auth settings for the extender's port on localhost" in output, output[-3000:]
    assert message in output, output[-3000:]


def test_good_tls_and_basic_auth_inputs_pass(tmp_path: Path) -> None:
    playbook = tmp_path / "check.yml"
    playbook.write_text(PLAYBOOK)
    extra = json.dumps(
        {
            "mco_common_web_tls": {
                "cert_file": "/a",
                "key_file": "/b",
                "client_auth_type": "RequireAndVerifyClientCert",
                "client_ca_file": "/c",
                "min_version": "TLS13",
            },
            "mco_common_web_users": {"prometheus": HASH, "volcano": HASH},
        }
    )
    proc = run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook), "-e", extra])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


#: Each combination WebSettings.problems refuses (the service would exit 2), as role variables: what the role's
#: check says, and what the service's loader says.
REFUSED: list[tuple[dict[str, str], dict[str, str], str, str]] = [
    ({"cert_file": "/a"}, {}, "set cert_file and key_file together", "certFile and keyFile go together"),
    ({"key_file": "/b"}, {}, "set cert_file and key_file together", "certFile and keyFile go together"),
    ({"client_auth_type": "RequireAndVerifyClientCert", "client_ca_file": "/c"}, {},
     "client certificates (client_auth_type, client_ca_file) need TLS", "client certificates need TLS"),
    ({"client_ca_file": "/c"}, {},
     "client certificates (client_auth_type, client_ca_file) need TLS", "client certificates need TLS"),
    ({"cert_file": "/a", "key_file": "/b", "client_ca_file": "/c"}, {},
     "client_ca_file is given but no client certificate is asked", "clientCaFile is given but no certificate"),
    ({"cert_file": "/a", "key_file": "/b", "client_auth_type": "VerifyClientCertIfGiven"}, {},
     "client_auth_type VerifyClientCertIfGiven needs client_ca_file",
     "clientAuthType VerifyClientCertIfGiven needs clientCaFile"),
    ({}, {"": HASH}, "a basic auth user name is not empty and has no ':' (these are: [''])",
     "'': a user name is not empty and has no ':'"),
    ({}, {"prom:etheus": HASH}, "a basic auth user name is not empty and has no ':' (these are: ['prom:etheus'])",
     "'prom:etheus': a user name is not empty and has no ':'"),
    ({}, {"prometheus": "hunter2"},
     "every basic auth user needs a bcrypt hash, not a password (these are not: ['prometheus'])", "not a bcrypt hash"),
]  # fmt: skip

_CAMEL = {
    "cert_file": "certFile",
    "key_file": "keyFile",
    "client_auth_type": "clientAuthType",
    "client_ca_file": "clientCaFile",
    "min_version": "minVersion",
}


def test_the_role_check_refuses_what_the_service_refuses(tmp_path: Path) -> None:
    """Every combination the service's loader refuses stops the run, each host's named (one run, a host a case)."""
    hosts: dict[str, dict[str, object]] = {}
    for i, (tls, users, _, service_says) in enumerate(REFUSED):
        with pytest.raises(ConfigError) as caught:
            load(
                extender.SPEC,
                document={"web": {"tls": {_CAMEL[k]: v for k, v in tls.items()}, "basicAuthUsers": users}},
                env={},
            )
        assert service_says in str(caught.value)
        hosts[f"case{i}"] = {"ansible_connection": "local", "mco_common_web_tls": tls, "mco_common_web_users": users}
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    playbook = tmp_path / "check.yml"
    playbook.write_text(PLAYBOOK.replace("hosts: localhost", "hosts: all"))
    proc = run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(playbook)])
    output = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, output[-2000:]
    for i, (_, _, role_says, _) in enumerate(REFUSED):
        assert f"Bad TLS or basic auth settings for the extender's port on case{i}: {role_says}" in output, (
            i,
            output[-4000:],
        )
    assert output.count("failed=1") == len(REFUSED), output[-3000:]


def test_client_certificates_with_a_pki_issued_server_certificate_pass(tmp_path: Path) -> None:
    playbook = tmp_path / "check.yml"
    playbook.write_text(PLAYBOOK)
    tls = {"client_auth_type": "RequireAndVerifyClientCert", "client_ca_file": "/c"}
    for pki, returncode in ((True, 0), (False, 2)):
        extra = json.dumps({"mco_common_web_tls": tls, "mco_common_web_users": {}, "mco_common_web_tls_pki": pki})
        proc = run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook), "-e", extra])
        assert proc.returncode == returncode, proc.stdout[-3000:] + proc.stderr[-2000:]


PKI_PLAYBOOK = """
- name: Issue a port's server certificate and a client's, as the roles do
  hosts: localhost
  gather_facts: false
  tasks:
    - name: The extender's port (mco_scheduler_extender_tls_pki)
      ansible.builtin.include_role:
        name: manycore.mco.mco_pki
        tasks_from: issue
      vars:
        mco_pki_component: extender
        mco_pki_common_name: ctl-1
        mco_pki_sans: ["DNS:localhost", "IP:127.0.0.1"]
    - name: A client certificate (what mco_pki issues collectors; here Prometheus')
      ansible.builtin.include_role:
        name: manycore.mco.mco_pki
        tasks_from: issue
      vars:
        mco_pki_component: collector
        mco_pki_common_name: prometheus
        mco_pki_sans: ["DNS:prometheus"]
"""


def _scrape(conn: http.client.HTTPConnection) -> int:
    conn.request("GET", "/metrics")  # TLS 1.3 reports a refused client certificate on the first read
    return conn.getresponse().status


@pytest.mark.timeout(600)
def test_mco_pki_certificates_serve_a_port_that_requires_client_certificates(tmp_path: Path) -> None:
    book = tmp_path / "pki.yml"
    book.write_text(PKI_PLAYBOOK)
    pki = tmp_path / "pki"
    proc = run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(book), "-e", f"mco_pki_dir={pki}",
         "-e", f"ansible_python_interpreter={sys.executable}"]
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    web = WebSettings(
        tls=TLSSettings(
            cert_file=pki / "localhost-extender.pem",
            key_file=pki / "localhost-extender-key.pem",
            client_auth_type="RequireAndVerifyClientCert",
            client_ca_file=pki / "ca.pem",
        )
    )
    registry = CollectorRegistry()
    Counter("mco_test_total", "t", registry=registry).inc()
    server = serve_metrics(registry, host="127.0.0.1", port=0, security=web.security("web"))
    try:
        context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
        context.load_cert_chain(str(pki / "localhost-collector.pem"), str(pki / "localhost-collector-key.pem"))
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=30, context=context)
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200
        assert b"mco_test_total 1.0" in response.read()
        conn.close()
        bare = http.client.HTTPSConnection(
            "127.0.0.1", server.port, timeout=30, context=ssl.create_default_context(cafile=str(pki / "ca.pem"))
        )
        with pytest.raises((ssl.SSLError, ConnectionError)):  # without a client certificate
            _scrape(bare)
        bare.close()
    finally:
        server.stop()


CONFIGURE_PLAYBOOK = """
- name: The extender role's configure step, with TLS from mco_pki and basic auth
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Configure
      ansible.builtin.include_role:
        name: manycore.mco.mco_scheduler_extender
        tasks_from: configure
  handlers:
    - name: Restart (nothing runs here)
      ansible.builtin.debug:
        msg: restart
      listen: mco-extender restart
"""


@pytest.mark.timeout(600)
def test_the_extender_role_installs_its_certificate_and_key_least_privileged(tmp_path: Path) -> None:
    book = tmp_path / "configure.yml"
    book.write_text(CONFIGURE_PLAYBOOK)
    etc = tmp_path / "etc"
    etc.mkdir()
    setup = {"config_dir": str(etc), "state_dir": str(tmp_path), "user": "daemon", "venv": "/nonexistent"}
    extra = {
        "mco_common_setup": setup,
        "mco_pki_dir": str(tmp_path / "pki"),
        "mco_scheduler_extender_tls_pki": True,
        "mco_scheduler_extender_basic_auth_users": {"volcano": HASH},
        "ansible_python_interpreter": sys.executable,
        "ansible_facts": {"nodename": "ctl-1"},
        "ansible_host": "127.0.0.1",
    }
    proc = run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(book), "-e", json.dumps(extra)])
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    key = etc / "pki" / "extender-key.pem"
    certificate = etc / "pki" / "extender.pem"
    config = etc / "extender.yaml"
    assert (stat.S_IMODE(key.stat().st_mode), grp.getgrgid(key.stat().st_gid).gr_name) == (0o640, "daemon")
    assert (stat.S_IMODE(certificate.stat().st_mode), certificate.stat().st_gid) == (0o644, 0)
    assert (stat.S_IMODE(config.stat().st_mode), grp.getgrgid(config.stat().st_gid).gr_name) == (0o640, "daemon")
    # the kube-scheduler entry carries no basic auth: the role says what to add
    output = " ".join(proc.stdout.split())
    assert "WARNING: the extender on localhost asks for basic auth (mco_scheduler_extender_basic_auth_users)" in output
    assert "USER:PASSWORD in urlPrefix" in output
    settings = load(extender.SPEC, document=parse_document(config.read_text(), "extender.yaml")).settings
    assert settings.web.tls.cert_file == certificate
    assert settings.web.basic_auth_users == {"volcano": HASH}
    security = settings.web.security("web")  # the files make a usable server context
    assert security.tls is not None
    assert "INSECURE" not in proc.stdout


@pytest.mark.parametrize("rotating", [True, False])
def test_prometheus_trusts_mco_pkis_trust_bundle_during_a_ca_rotation(tmp_path: Path, rotating: bool) -> None:
    """Between mco_pki_ca_rotation=trust and finish the ports present certificates of either CA: the scrape
    Secret holds the trust bundle (both CAs), and mco_pki's ca.pem when no bundle was written yet."""
    pki = tmp_path / "pki"
    pki.mkdir()
    old = "-----BEGIN CERTIFICATE-----\nMIIBold\n-----END CERTIFICATE-----\n"
    new = "-----BEGIN CERTIFICATE-----\nMIIBnew\n-----END CERTIFICATE-----\n"
    (pki / "ca.pem").write_text(old)
    if rotating:
        (pki / "trust-bundle.pem").write_text(old + new)
    text = render_template(
        "mco_crds",
        "scrape-secret.yaml.j2",
        tmp_path / "secret.yaml",
        {"mco_metrics_tls_pki": True, "mco_pki_dir": str(pki)},
    )
    ca = yaml.safe_load(text)["stringData"]["ca.crt"]
    assert ca == ((old + new) if rotating else old).rstrip("\n")
