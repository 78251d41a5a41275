"""Host certificates renew on the hosts by themselves: `mco analyzer` and `mco collector` as real
processes, every certificate living 24 seconds, none reissued from outside.

The analyzer holds a signing CA (an intermediate of the root, as mco_pki gives control hosts) and
renews its own server certificate with it; the collector renews its client certificate through
the analyzer's Renew call. Both trust only the root. The stream keeps flowing past the first
certificates' expiry, and a fresh connection (the analyzer restarted) succeeds with the renewed
certificates only: their chains (leaf + signing CA) are what gRPC presents and accepts.
"""

from __future__ import annotations

import datetime
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

from mco_py.obs.pki import load_chain
from tests.analyzer.certs import TestCA
from tests.cluster.cluster import free_port
from tests.collector.test_exporter import scrape
from tests.mco_host import HOST_TREE, MCO
from tests.waiting import wait_until

LIFETIME = 24.0


def short_lived(ca: TestCA, stem: str, name: str, *, server: bool) -> tuple[Path, Path]:
    now = datetime.datetime.now(datetime.UTC)
    issued = ca.issue(
        stem,
        name,
        [name, "localhost"] if server else [name],
        ips=["127.0.0.1"] if server else None,
        server=server,
        not_before=now - datetime.timedelta(seconds=1),
        not_after=now + datetime.timedelta(seconds=LIFETIME - 1),
    )
    return issued.cert, issued.key


class Processes:
    def __init__(self, etc: Path) -> None:
        self.etc = etc
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, part: str) -> None:
        with (self.etc / f"{part}.log").open("ab") as log:
            self.procs[part] = subprocess.Popen(
                [*MCO, part, "--config", str(self.etc / f"{part}.yaml")], stdout=subprocess.DEVNULL, stderr=log
            )

    def stop(self, part: str) -> None:
        proc = self.procs.pop(part)
        proc.terminate()
        proc.wait(timeout=20)

    def logs(self) -> str:
        return "\n".join(f"--- {p}\n" + (self.etc / f"{p}.log").read_text()[-4000:] for p in ("analyzer", "collector"))


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[tuple[Processes, dict[str, int], dict[str, Path]]]:
    ca = TestCA(tmp_path)
    signer = ca.intermediate("signer")
    server_cert, server_key = short_lived(ca, "analyzer", "ctl-1", server=True)
    web_cert, web_key = short_lived(ca, "analyzer-metrics", "ctl-1", server=True)
    client_cert, client_key = short_lived(ca, "collector", "node-1", server=False)
    shutil.copytree(HOST_TREE, tmp_path / "node")
    etc = tmp_path / "etc"
    etc.mkdir()
    ports = {name: free_port() for name in ("grpc", "analyzer", "collector")}
    analyzer = {
        "mode": "standalone",
        "identity": "renewal-test",
        "listen": f"127.0.0.1:{ports['grpc']}",
        "metricsHost": "127.0.0.1",
        "metricsPort": ports["analyzer"],
        "reportFile": str(tmp_path / "report.json"),
        "rulesFile": str(tmp_path / "no-rules.yaml"),
        "tlsCert": str(server_cert),
        "tlsKey": str(server_key),
        "tlsCa": str(ca.path),
        "tlsSignerCert": str(signer.cert),
        "tlsSignerKey": str(signer.key),
        "certTerm": LIFETIME,
        "metricsWeb": {"tls": {"certFile": str(web_cert), "keyFile": str(web_key)}},
    }
    collector = {
        "nodeName": "node-1",
        "interval": 0.3,
        "metricsHost": "127.0.0.1",
        "metricsPort": ports["collector"],
        "bioBackend": "diskstats",
        "llc": "off",
        "procRoot": str(tmp_path / "node" / "proc"),
        "sysRoot": str(tmp_path / "node" / "sys"),
        "stream": {
            "analyzers": [f"127.0.0.1:{ports['grpc']}"],
            "flushInterval": 0,
            "backoffInitial": 0.2,
            "backoffMax": 1,
            "tlsCa": str(ca.path),
            "tlsCert": str(client_cert),
            "tlsKey": str(client_key),
            "tlsServerName": "localhost",
        },
    }
    (etc / "analyzer.yaml").write_text(yaml.safe_dump(analyzer))
    (etc / "collector.yaml").write_text(yaml.safe_dump(collector))
    procs = Processes(etc)
    try:
        procs.start("analyzer")
        procs.start("collector")
        yield procs, ports, {"server": server_cert, "client": client_cert, "client_key": client_key, "web": web_cert,
                             "ca": ca.path}  # fmt: skip
    finally:
        for proc in procs.procs.values():
            proc.kill()
            proc.wait(timeout=20)


def value(port: int, name: str, *, ca: Path | None = None, **labels: str) -> float:
    """A series' value summed over matching labels; over HTTPS verified with the root ``ca`` alone when given."""
    try:
        if ca is None:
            series = scrape(port)
        else:
            context = ssl.create_default_context(cafile=str(ca))
            with urllib.request.urlopen(f"https://localhost:{port}/metrics", timeout=10, context=context) as reply:
                text = reply.read().decode()
            series = {
                (s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
            }
    except OSError:
        return 0.0
    return sum(v for (n, ls), v in series.items() if n == name and labels.items() <= dict(ls).items())


def served_not_after(port: int, ca: Path) -> float:
    """notAfter of the certificate the HTTPS port presents, verified against the root alone."""
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).not_valid_after_utc.timestamp()


def not_after(path: Path) -> float:
    return load_chain(path.read_bytes())[0].not_valid_after_utc.timestamp()


@pytest.mark.timeout(240)
def test_a_collector_keeps_streaming_past_its_first_certificate_and_both_sides_renew(
    hosts: tuple[Processes, dict[str, int], dict[str, Path]],
) -> None:
    procs, ports, files = hosts
    first_client, first_server = not_after(files["client"]), not_after(files["server"])
    first_web = not_after(files["web"])
    analyzer = {"ca": files["ca"]}  # its /metrics is HTTPS

    def sent() -> float:
        return value(ports["collector"], "mco_collector_samples_sent_total")

    try:
        wait_until(lambda: sent() > 0, "the first acknowledged samples", timeout=30)
        # past the expiry of both first certificates (each renewed at about 2/3 of its 24 s)
        wait_until(lambda: time.time() > max(first_client, first_server) + 2, "the first certificates' expiry", 60)
        before = sent()
        wait_until(lambda: sent() > before + 5, "samples acknowledged after the first certificates expired", 20)
        assert not_after(files["client"]) > first_client, "the collector's certificate was not renewed"
        assert not_after(files["server"]) > first_server, "the analyzer's certificate was not renewed"
        assert len(load_chain(files["client"].read_bytes())) == 2  # leaf + signing CA
        assert files["client_key"].stat().st_mode & 0o777 == 0o600
        # the next renewal authenticates with the renewed certificate (the first one has expired)
        wait_until(
            lambda: value(ports["collector"], "mco_collector_credential_renewals_total", result="renewed") >= 2,
            "a second renewal of the collector's certificate, authenticated by the first renewed one",
            timeout=30,
        )
        wait_until(
            lambda: (
                value(
                    ports["analyzer"],
                    "mco_analyzer_credential_renewals_total",
                    **analyzer,
                    credential="grpc_certificate",
                    result="renewed",
                )
                >= 2
            ),
            "a second renewal of the analyzer's own certificate",
            timeout=30,
        )
        assert (
            value(ports["analyzer"], "mco_analyzer_certificate_renewals_signed_total", **analyzer, result="signed") >= 2
        )
        # the HTTPS port's certificate renewed too: served with its chain, verified against the root alone
        wait_until(
            lambda: served_not_after(ports["analyzer"], files["ca"]) > first_web, "a renewed /metrics certificate"
        )
        assert time.time() > first_web  # past the first one's expiry, the port still verifies
        assert value(ports["collector"], "mco_collector_credential_renewals_total", result="error") == 0
        # the daemon renewed through a short-lived child: it never mapped cryptography's library itself
        maps = Path(f"/proc/{procs.procs['collector'].pid}/maps").read_text()
        assert "cryptography" not in maps
        # a new connection works with the renewed certificates only: restart the analyzer
        procs.stop("analyzer")
        procs.start("analyzer")
        after = sent()
        wait_until(lambda: sent() > after + 5, "samples acknowledged over a fresh connection after a restart", 40)
    except (TimeoutError, AssertionError) as exc:
        raise AssertionError(f"{exc}\n{procs.logs()}") from exc
