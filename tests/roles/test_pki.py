"""mco_pki makes a CA and per-host certificates that the analyzer's mTLS accepts, idempotently, and rotates them."""

from __future__ import annotations

import datetime
import json
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mco_py.analyzer.service import TLSFiles
from mco_py.obs.pki import Signer, key_pem, new_key, signing_request
from tests.analyzer.test_service import Analyzer, good, stream
from tests.docs.doc_commands import select
from tests.rpc import wire

from .helpers import BIN, REPO, run

PLAYBOOK = """
- name: Issue the collector's and the analyzer's certificates
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Collector
      ansible.builtin.include_role:
        name: manycore.mco.mco_pki
        tasks_from: issue
      vars:
        mco_pki_component: collector
        mco_pki_common_name: node-1
        mco_pki_sans: ["DNS:node-1"]
    - name: Analyzer
      ansible.builtin.include_role:
        name: manycore.mco.mco_pki
        tasks_from: issue
      vars:
        mco_pki_component: analyzer
        mco_pki_common_name: ctl-1
        mco_pki_sans: ["DNS:localhost", "IP:127.0.0.1"]
"""


def play(tmp_path: Path, *extra: str) -> tuple[str, dict[str, int]]:
    book = tmp_path / "pki.yml"
    book.write_text(PLAYBOOK)
    argv = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(book)]
    argv += ["-e", f"mco_pki_dir={tmp_path / 'pki'}", "-e", f"ansible_python_interpreter={sys.executable}", *extra]
    proc = run(argv)
    recap = re.search(r"localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", proc.stdout)
    names = ("ok", "changed", "unreachable", "failed")
    counts = dict(zip(names, map(int, recap.groups()), strict=True)) if recap else {}
    return proc.stdout + proc.stderr, counts


def cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


@pytest.fixture(scope="module")
def issued(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new controller's first run (the CA, the collector's and the analyzer's keys and certificates),
    once for the module: the tests that start from it take a copy (``from_issued``), and never change it."""
    into = tmp_path_factory.mktemp("issued")
    out, counts = play(into)
    assert counts.get("failed") == 0, out
    return into / "pki"


def from_issued(issued: Path, tmp_path: Path) -> Path:
    """``tmp_path/pki`` as the first run left it (modes and times kept), for ``play(tmp_path)``."""
    return Path(shutil.copytree(issued, tmp_path / "pki"))


# Three playbook runs of the PKI role (after the module's first one): about 50 s on an idle 2-core machine, twice that
# beside make test's second lane (pytest-timeout's default is 120 s).
@pytest.mark.timeout(600)
def test_certificates_work_for_mtls_are_idempotent_and_rotate(issued: Path, tmp_path: Path) -> None:
    assert stat.S_IMODE(issued.stat().st_mode) == 0o700  # as the role left them
    for key in ("ca-key.pem", "localhost-collector-key.pem", "localhost-analyzer-key.pem"):
        assert stat.S_IMODE((issued / key).stat().st_mode) == 0o600, key
    pki = from_issued(issued, tmp_path)
    collector = cert(pki / "localhost-collector.pem")
    assert collector.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "node-1"

    a = Analyzer(tls=TLSFiles(pki / "localhost-analyzer.pem", pki / "localhost-analyzer-key.pem", pki / "ca.pem"))
    try:
        creds = grpc.ssl_channel_credentials(
            root_certificates=(pki / "ca.pem").read_bytes(),
            private_key=(pki / "localhost-collector-key.pem").read_bytes(),
            certificate_chain=(pki / "localhost-collector.pem").read_bytes(),
        )
        with grpc.secure_channel(f"127.0.0.1:{a.port}", creds) as ch:
            (reply,) = stream(ch, [wire.batch_to_proto([good("node-1"), good("node-2")], collector="c", sequence=1)])
        assert (reply.ack.accepted, reply.ack.rejected) == (1, 1)  # node-1's certificate cannot report node-2
        with grpc.insecure_channel(f"127.0.0.1:{a.port}") as ch, pytest.raises(grpc.RpcError):
            stream(ch, [wire.batch_to_proto([good("node-1")], collector="c", sequence=2)])
    finally:
        a.server.stop(0)

    out, counts = play(tmp_path)
    assert counts.get("changed") == 0, out
    out, counts = play(tmp_path, "-e", "mco_pki_rotate=true")
    assert counts.get("failed") == 0, out
    rotated = cert(pki / "localhost-collector.pem")
    assert rotated.serial_number != collector.serial_number
    assert rotated.public_key() != collector.public_key()
    assert cert(pki / "ca.pem").issuer == rotated.issuer  # the CA stays: nodes keep trusting it
    out, counts = play(tmp_path)
    assert counts.get("changed") == 0, out


def test_an_operator_ca_must_come_with_its_key(tmp_path: Path) -> None:
    out, counts = play(tmp_path, "-e", f"mco_pki_ca_cert={tmp_path / 'ca.pem'}")
    assert counts.get("failed") == 1, out
    assert "set both mco_pki_ca_cert and mco_pki_ca_key" in out


@pytest.mark.timeout(600)
def test_check_mode_says_what_it_would_issue_and_writes_nothing(issued: Path, tmp_path: Path) -> None:
    # a new controller: no CA, no keys
    out, counts = play(tmp_path, "--check")
    assert counts.get("failed") == 0, out
    assert not (tmp_path / "pki").exists()
    assert "Would issue localhost's collector key and certificate" in out
    assert re.search(r"analyzer key and certificate in \S+\s+on the controller\s+\(and the CA\)", out), out
    # the CA and the collector's certificate issued (the first run); the analyzer's key gone (a new component)
    pki = from_issued(issued, tmp_path)
    (pki / "localhost-analyzer-key.pem").unlink()
    before = {p.name: p.read_bytes() for p in pki.iterdir()}
    out, counts = play(tmp_path, "--check")
    assert counts.get("failed") == 0, out
    assert "Would issue localhost's analyzer key and certificate" in out
    assert "Would issue localhost's collector" not in out  # issued: predicted by the crypto modules
    assert "(and the CA)" not in out
    assert {p.name: p.read_bytes() for p in pki.iterdir()} == before


@pytest.mark.timeout(600)
def test_check_mode_after_switching_host_renewal_on_says_it_would_issue_the_signing_ca(tmp_path: Path) -> None:
    # certificates issued without host renewal: no signing CA yet
    out, counts = play(tmp_path, "-e", "mco_pki_host_renewal=false")
    assert counts.get("failed") == 0, out
    pki = tmp_path / "pki"
    assert not list(pki.glob("*signer*"))
    before = {p.name: p.read_bytes() for p in pki.iterdir()}
    out, counts = play(tmp_path, "--check")  # host renewal on (the default)
    assert counts.get("failed") == 0, out
    assert "Would issue the signing CA of localhost" in out
    assert {p.name: p.read_bytes() for p in pki.iterdir()} == before
    out, counts = play(tmp_path)  # and the real run issues it
    assert counts.get("failed") == 0, out
    assert (pki / "localhost-signer.pem").is_file()


def certificates(path: Path) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(path.read_bytes())


# Five playbook runs of the PKI role (after the module's first one), each under 30 s on an idle 2-core machine.
@pytest.mark.timeout(900)
def test_the_ca_rotates_in_three_steps_with_a_stream_flowing_throughout(issued: Path, tmp_path: Path) -> None:
    """docs/runbooks.md, "Rotate the CA": trust, issue, finish, each a run; the stream never drops."""
    from tests.analyzer.test_ca_rotation import Streaming, analyzer_on

    documented = select(REPO / "docs" / "runbooks.md", "Rotate the CA", r"mco_pki_ca_rotation=")
    steps = [command.split("-e ")[-1] for command in documented]
    assert documented == [f".venv/bin/ansible-playbook -i $INV playbooks/mco.yml -e {step}" for step in steps]
    assert steps == [f"mco_pki_ca_rotation={step}" for step in ("trust", "issue", "finish")]
    pki = from_issued(issued, tmp_path)
    old = cert(pki / "ca.pem")
    bundle = pki / "trust-bundle.pem"
    node = ("node-1", bundle, pki / "localhost-collector.pem", pki / "localhost-collector-key.pem")
    server, port = analyzer_on(pki / "localhost-analyzer.pem", pki / "localhost-analyzer-key.pem", bundle)
    opened: list[Streaming] = []
    try:
        opened.append(Streaming(port, files=node))
        steady = opened[0]
        assert steady.flows()

        out, counts = play(tmp_path, "-e", steps[0])  # the runbook's steps, the role as playbooks/mco.yml runs it
        assert counts.get("failed") == 0, out
        new = cert(pki / "ca-next.pem")
        assert [c.subject for c in certificates(bundle)] == [old.subject, new.subject]
        assert cert(pki / "localhost-collector.pem").issuer == old.subject  # certificates stay
        assert steady.flows()
        opened.append(Streaming(port, files=node))
        assert opened[-1].flows()

        out, counts = play(tmp_path, "-e", steps[1])
        assert counts.get("failed") == 0, out
        for component in ("collector", "analyzer"):
            assert cert(pki / f"localhost-{component}.pem").issuer == new.subject, component
        assert len(certificates(bundle)) == 2
        assert steady.flows()
        opened.append(Streaming(port, files=node))
        assert opened[-1].flows()
        out, counts = play(tmp_path)  # a plain run in between keeps the step
        assert counts.get("changed") == 0, out

        out, counts = play(tmp_path, "-e", steps[2])
        assert counts.get("failed") == 0, out
        assert [c.subject for c in certificates(bundle)] == [new.subject]
        assert cert(pki / "ca.pem") == new
        assert cert(pki / "ca-old.pem") == old
        assert steady.flows()
        opened.append(Streaming(port, files=node))
        assert opened[-1].flows()
        out, counts = play(tmp_path, "-e", "mco_pki_ca_rotation=finish")  # finishing again changes nothing
        assert counts.get("changed") == 0, out
        assert steady.stream.status().reconnects == 0
    finally:
        for one in opened:
            one.close()
        server.stop(0)


def test_a_rotation_step_out_of_order_is_refused(issued: Path, tmp_path: Path) -> None:
    from_issued(issued, tmp_path)
    out, counts = play(tmp_path, "-e", "mco_pki_ca_rotation=issue")
    assert counts.get("failed") == 1, out
    assert "cannot follow the step" in out
    assert "run trust (the new CA in every bundle), then issue" in out


RENEWAL_PLAYBOOK = """
- name: Issue certificates as playbooks/mco.yml does (an analyzer's on control hosts only)
  hosts: all
  gather_facts: false
  tasks:
    - name: Collector
      ansible.builtin.include_role:
        name: manycore.mco.mco_pki
        tasks_from: issue
      vars:
        mco_pki_component: collector
        mco_pki_common_name: "{{ inventory_hostname }}"
        mco_pki_sans: ["DNS:{{ inventory_hostname }}"]
    - name: What the collector's role gets
      ansible.builtin.copy:
        content: "{{ mco_pki_files | to_json }}"
        dest: "{{ out }}/{{ inventory_hostname }}-collector.json"
        mode: "0644"
      delegate_to: localhost
      changed_when: false  # the test's record, not the role's change
    - name: Analyzer
      ansible.builtin.include_role:
        name: manycore.mco.mco_pki
        tasks_from: issue
      vars:
        mco_pki_component: analyzer
        mco_pki_common_name: "{{ inventory_hostname }}"
        mco_pki_sans: ["DNS:localhost"]
      when: "'mco_control' in group_names"
    - name: What the analyzer's role gets
      ansible.builtin.copy:
        content: "{{ mco_pki_files | to_json }}"
        dest: "{{ out }}/{{ inventory_hostname }}-analyzer.json"
        mode: "0644"
      delegate_to: localhost
      changed_when: false  # the test's record, not the role's change
      when: "'mco_control' in group_names"
"""


def play_two_hosts(tmp_path: Path, *extra: str) -> tuple[str, dict[str, int]]:
    book = tmp_path / "renewal.yml"
    book.write_text(RENEWAL_PLAYBOOK)
    inventory = tmp_path / "inventory.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "children": {"mco_control": {"hosts": {"ctl-1": local}}, "mco_nodes": {"hosts": {"node-1": local}}}
                }
            }
        )
    )
    (tmp_path / "out").mkdir(exist_ok=True)
    argv = [str(BIN / "ansible-playbook"), "-i", str(inventory), str(book)]
    argv += ["-e", f"mco_pki_dir={tmp_path / 'pki'}", "-e", f"out={tmp_path / 'out'}", *extra]
    proc = run(argv)
    totals = {"changed": 0, "failed": 0}
    for changed, unreachable, failed in re.findall(
        r"\S+\s*:\s*ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", proc.stdout
    ):
        totals["changed"] += int(changed)
        totals["failed"] += int(failed) + int(unreachable)
    return proc.stdout + proc.stderr, totals


def files_for(tmp_path: Path, host: str, component: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((tmp_path / "out" / f"{host}-{component}.json").read_text())
    return loaded


@pytest.mark.timeout(600)
def test_the_signing_ca_is_issued_for_control_hosts_only_and_signs_renewals_the_ca_trusts(tmp_path: Path) -> None:
    out, counts = play_two_hosts(tmp_path)
    assert counts["failed"] == 0, out
    pki = tmp_path / "pki"
    assert (pki / "ctl-1-signer.pem").is_file()
    assert not list(pki.glob("node-1-signer*"))
    assert stat.S_IMODE((pki / "ctl-1-signer-key.pem").stat().st_mode) == 0o600
    analyzer = files_for(tmp_path, "ctl-1", "analyzer")
    assert analyzer["signer_cert"] == str(pki / "ctl-1-signer.pem")
    assert analyzer["signer_key"] == str(pki / "ctl-1-signer-key.pem")
    assert analyzer["renewal"] is True
    for host in ("ctl-1", "node-1"):
        collector = files_for(tmp_path, host, "collector")
        assert (collector["signer_cert"], collector["signer_key"], collector["renewal"]) == ("", "", True), host
    root, signer = cert(pki / "ca.pem"), cert(pki / "ctl-1-signer.pem")
    constraints = signer.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical
    assert (constraints.value.ca, constraints.value.path_length) == (True, 0)
    usage = signer.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign
    assert not usage.digital_signature
    # the leaves below it can only be TLS servers and clients (Go and OpenSSL enforce a CA's EKU)
    assert set(signer.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == {
        x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
        x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH,
    }
    assert root.extensions.get_extension_for_class(x509.BasicConstraints).value.path_length == 1
    signer.verify_directly_issued_by(root)

    # the analyzer's signing CA renews node-1's certificate; OpenSSL verifies it against the CA alone
    peer = cert(pki / "node-1-collector.pem")
    chain = Signer(pki / "ctl-1-signer.pem", pki / "ctl-1-signer-key.pem").sign_request(
        signing_request(peer, new_key()), peer.public_bytes(serialization.Encoding.PEM)
    )
    (tmp_path / "renewed.pem").write_bytes(chain)
    argv = ["openssl", "verify", "-CAfile", str(pki / "ca.pem"), "-untrusted", str(tmp_path / "renewed.pem")]
    done = subprocess.run([*argv, str(tmp_path / "renewed.pem")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr

    out, counts = play_two_hosts(tmp_path)
    assert counts["changed"] == 0, out
    assert cert(pki / "ctl-1-signer.pem") == signer


def pathlen0_ca(tmp_path: Path) -> tuple[Path, Path]:
    """A CA as mco_pki made them before host renewal: pathlen 0."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "old-ca")])
    now = datetime.datetime.now(datetime.UTC)
    ca = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "old-ca.pem", tmp_path / "old-ca-key.pem"
    cert_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key_pem(key))
    return cert_path, key_path


@pytest.mark.timeout(600)
def test_a_ca_that_cannot_delegate_leaves_renewal_to_the_controller_and_says_how_to_get_it(tmp_path: Path) -> None:
    ca_cert, ca_key = pathlen0_ca(tmp_path)
    out, counts = play_two_hosts(tmp_path, "-e", f"mco_pki_ca_cert={ca_cert}", "-e", f"mco_pki_ca_key={ca_key}")
    assert counts["failed"] == 0, out
    assert "has pathlen:0" in out
    assert "Rotate the CA (mco_pki_ca_rotation=trust, issue, finish" in out
    assert not list((tmp_path / "pki").glob("*signer*"))
    assert files_for(tmp_path, "ctl-1", "analyzer")["renewal"] is False
    assert files_for(tmp_path, "node-1", "collector")["renewal"] is False
