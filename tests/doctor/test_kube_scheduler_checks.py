"""``mco doctor --cluster`` on kube-scheduler's configuration: MCO's kube-scheduler (its ConfigMap) and the
cluster's (``--kube-scheduler-config FILE``): mco-plugin or MCO's extender entry, reachable from where the
scheduler runs, ``ignorable`` named, TLS settings."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from mco_py.doctor.checks import Check, Verdict
from mco_py.doctor.cluster_probe import extender_answer, extender_answers, read_scheduler_file
from mco_py.doctor.cluster_view import Read, SchedulerFile, shown_url
from mco_py.doctor.kube_scheduler_checks import kube_scheduler_checks, mco_extender_cas, mco_extender_urls
from tests.analyzer.certs import TestCA
from tests.cluster.cluster import free_port
from tests.docs.examples import render_kube_scheduler_entry
from tests.doctor.kubeconfigs import unreachable_kubeconfig

ROLE_URL = "http://10.0.0.11:9879/kube"
#: The registration docs/extender.md gave before: a host-network kube-scheduler cannot resolve it.
SVC_URL = "http://mco-scheduler-extender.mco-system.svc:9879/kube"


def configuration(*extenders: Mapping[str, Any], plugin: Mapping[str, Any] | None = None) -> str:
    profile: dict[str, Any] = {"schedulerName": "default-scheduler"}
    if plugin is not None:  # as roles/mco_kube_scheduler writes it
        profile = {
            "schedulerName": "mco-scheduler",
            "plugins": {"multiPoint": {"enabled": [{"name": "mco-plugin", "weight": 5}]}},
            "pluginConfig": [{"name": "mco-plugin", "args": dict(plugin)}],
        }
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "profiles": [profile]}
    return yaml.safe_dump(doc | ({"extenders": list(extenders)} if extenders else {}))


@functools.cache
def _role_entry() -> str:
    return render_kube_scheduler_entry({"mco_mode": "cluster", "ansible_host": "10.0.0.11"})


def entry(**changes: Any) -> dict[str, Any]:
    """The entry the mco_scheduler_extender role writes (for a host at 10.0.0.11), changed."""
    (base,) = yaml.safe_load(_role_entry())["extenders"]
    return {k: v for k, v in (base | changes).items() if v is not None}


def judge_file(text: str, answers: Mapping[str, str] | None = None) -> Check:
    (check,) = kube_scheduler_checks(Read(), [SchedulerFile("/etc/kubernetes/scheduler.yaml", text)], answers or {})
    return check


def test_the_roles_entry_reachable_is_ok_and_names_the_choices() -> None:
    check = judge_file(configuration(entry()), {ROLE_URL: ""})
    assert check == Check(
        "kube-scheduler",
        Verdict.OK,
        f"/etc/kubernetes/scheduler.yaml: extender {ROLE_URL}, answers from here, plaintext "
        "(ignorable: an unreachable extender lets pods be placed without MCO)",
    )
    held = judge_file(configuration(entry(ignorable=False)), {ROLE_URL: ""})
    assert held.verdict is Verdict.OK
    assert "not ignorable: an unreachable extender holds this scheduler's pods" in held.detail


def test_a_service_name_on_the_host_network_fails_even_when_ignorable() -> None:
    check = judge_file(configuration(entry(urlPrefix=SVC_URL)), {SVC_URL: "[Errno -2] Name or service not known"})
    assert check.verdict is Verdict.FAIL
    assert "mco-scheduler-extender.mco-system.svc is a cluster DNS name" in check.detail
    assert "does not answer from here" in check.detail
    assert "/etc/mco/kube-scheduler-extender.yaml" in check.next_step


def test_the_same_name_in_mcos_own_kube_scheduler_pod_is_fine() -> None:
    """MCO's kube-scheduler is a pod on the pod network: cluster DNS resolves *.svc there."""
    conf = Read({"data": {"config.yaml": configuration(entry(urlPrefix=SVC_URL))}})
    (check,) = kube_scheduler_checks(conf, [], {})
    assert check.verdict is Verdict.OK, check
    assert check.detail.startswith("mco-system/mco-kube-scheduler: extender " + SVC_URL)


@pytest.mark.parametrize(
    ("changes", "verdict", "says"),
    [
        ({}, Verdict.FAIL, f"{ROLE_URL} does not answer from here (Connection refused)"),
        ({"urlPrefix": "https://10.0.0.11:9879/kube", "enableHTTPS": True}, Verdict.WARN, "not verified"),
        ({"enableHTTPS": True}, Verdict.WARN, "enableHTTPS: true does nothing for an http:// urlPrefix"),
        ({"tlsConfig": {"insecure": True}}, Verdict.WARN, "the extender's certificate is not verified"),
        ({"filterVerb": "predicate"}, Verdict.FAIL, "filterVerb must be 'filter'"),
        ({"weight": 0}, Verdict.FAIL, "weight must be a positive integer"),
        ({"httpTimeout": "100ms"}, Verdict.FAIL, "httpTimeout 0.1 s is below 1 s"),
        ({"httpTimeout": "soon"}, Verdict.FAIL, "'soon' is not a duration"),
        ({"ignorable": "true"}, Verdict.FAIL, "ignorable must be a YAML bool"),
    ],
)
def test_each_bad_setting_is_named(changes: dict[str, Any], verdict: Verdict, says: str) -> None:
    url = str(changes.get("urlPrefix", ROLE_URL))
    answers = {url: "Connection refused" if not changes else ""}
    check = judge_file(configuration(entry(**changes)), answers)
    assert check.verdict is verdict, check
    assert says in check.detail


def test_a_scheduler_without_mco_and_one_with_both_ways() -> None:
    none = judge_file(configuration({"urlPrefix": "http://other:80/scheduler", "filterVerb": "filter"}))
    assert none.verdict is Verdict.FAIL
    assert "runs without MCO" in none.detail
    both = judge_file(configuration(entry(), plugin={}), {ROLE_URL: ""})
    assert both.verdict is Verdict.WARN
    assert "every decision is made twice" in both.detail
    assert judge_file("kind: Pod\n").detail.endswith("not a KubeSchedulerConfiguration")
    assert "not YAML" in judge_file("profiles: [\n").detail


def test_mcos_kube_scheduler_configmap_is_judged_by_its_plugin_arguments() -> None:
    good = Read({"data": {"config.yaml": configuration(plugin={"crName": "cluster", "crStatusTTLSeconds": 30})}})
    assert [(c.verdict, c.detail) for c in kube_scheduler_checks(good, [], {})] == [
        (Verdict.OK, "mco-system/mco-kube-scheduler: mco-plugin in profile mco-scheduler")
    ]
    bad = Read({"data": {"config.yaml": configuration(plugin={"crName": "cluster", "ttl": 3})}})
    (check,) = kube_scheduler_checks(bad, [], {})
    assert check.verdict is Verdict.FAIL
    assert "mco-plugin ignores the argument(s) ttl" in check.detail
    assert "playbooks/kube_scheduler.yml" in check.next_step


def test_nothing_to_check_shows_no_check_and_an_unreadable_one_says_why(tmp_path: Path) -> None:
    assert list(kube_scheduler_checks(Read(), [], {})) == []
    (forbidden,) = kube_scheduler_checks(Read(error="HTTP 403 Forbidden"), [], {})
    assert forbidden.verdict is Verdict.FAIL
    assert "cannot read ConfigMap mco-system/mco-kube-scheduler: HTTP 403 Forbidden" in forbidden.detail
    missing = read_scheduler_file(tmp_path / "nope.yaml")
    assert missing.error == "No such file or directory"
    (check,) = kube_scheduler_checks(Read(), [missing], {})
    assert check.verdict is Verdict.FAIL
    assert check.detail == f"{tmp_path / 'nope.yaml'}: cannot read it: No such file or directory"


def test_only_mcos_extender_urls_are_called() -> None:
    text = configuration(entry(), {"urlPrefix": "http://other:80/scheduler", "filterVerb": "filter"})
    assert mco_extender_urls(text) == [ROLE_URL]
    assert mco_extender_urls("[: broken") == []
    assert mco_extender_urls(None) == []
    broken = judge_file(configuration(entry(urlPrefix="http://[::1/kube")), {"http://[::1/kube": "Invalid IPv6 URL"})
    assert broken.verdict is Verdict.FAIL
    assert "is not an http:// URL" in broken.detail


@pytest.fixture
def readyz() -> Iterator[int]:
    """A real HTTP server on port 0 that answers /readyz."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/readyz" else 404)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_reachability_is_an_http_answer_from_here(readyz: int) -> None:
    assert extender_answer(f"http://127.0.0.1:{readyz}/kube", timeout=5) == ""
    refused = extender_answer(f"http://127.0.0.1:{free_port()}/kube", timeout=5)
    assert "Connection refused" in refused
    assert extender_answer("http://name.invalid:9879/kube", timeout=5) != ""


def test_doctor_cluster_checks_the_file_even_without_an_api_server(tmp_path: Path, readyz: int) -> None:
    kubeconfig = unreachable_kubeconfig(tmp_path / "kubeconfig")
    good, stale = tmp_path / "scheduler.yaml", tmp_path / "old-scheduler.yaml"
    good.write_text(configuration(entry(urlPrefix=f"http://127.0.0.1:{readyz}/kube")))
    stale.write_text(configuration(entry(urlPrefix=SVC_URL)))
    run = subprocess.run(
        [sys.executable, "-m", "mco_py.cli", "doctor", "--cluster", "--kubeconfig", str(kubeconfig), "-o", "json",
         "--timeout", "2", "--kube-scheduler-config", str(good), "--kube-scheduler-config", str(stale)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    checks = [(c["name"], c["verdict"], c["detail"]) for c in json.loads(run.stdout)["checks"]]
    assert [name for name, _, _ in checks] == ["report CRD", "kube-scheduler", "kube-scheduler"]
    assert checks[1][1] == "ok"
    assert f"extender http://127.0.0.1:{readyz}/kube, answers from here" in checks[1][2]
    assert checks[2][1] == "fail"
    assert "is a cluster DNS name" in checks[2][2]
    # no kubeconfig at all (a control-plane node): the file is still checked
    alone = subprocess.run(
        [sys.executable, "-m", "mco_py.cli", "doctor", "--cluster", "--kubeconfig", str(tmp_path / "none"), "-o",
         "json", "--kube-scheduler-config", str(stale)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert alone.returncode == 2, alone.stderr
    verdicts = [(c["name"], c["verdict"]) for c in json.loads(alone.stdout)["checks"]]
    assert verdicts == [("kubeconfig", "fail"), ("kube-scheduler", "fail")]


_value = st.none() | st.booleans() | st.integers() | st.text(max_size=12)
_entries = st.lists(
    st.dictionaries(
        st.sampled_from(
            [
                "urlPrefix",
                "filterVerb",
                "prioritizeVerb",
                "weight",
                "ignorable",
                "httpTimeout",
                "enableHTTPS",
                "tlsConfig",
            ]
        ),
        _value | st.sampled_from([ROLE_URL, SVC_URL, "https://x/kube", "x/kube", "http://[::1/kube"]),
    ),
    max_size=3,
)


@given(entries=_entries, profiles=st.lists(st.dictionaries(st.text(max_size=6), _value), max_size=2))
def test_any_configuration_is_judged_not_a_crash(entries: list[dict[str, Any]], profiles: list[Any]) -> None:
    text = yaml.safe_dump({"kind": "KubeSchedulerConfiguration", "extenders": entries, "profiles": profiles})
    for check in kube_scheduler_checks(Read(), [SchedulerFile("f", text)], dict.fromkeys(mco_extender_urls(text), "")):
        assert check.verdict in Verdict


@pytest.mark.parametrize("client_certificates", [False, True])
def test_an_https_extender_answers_and_a_plain_one_behind_https_is_named(
    tmp_path: Path, readyz: int, client_certificates: bool
) -> None:
    """A TLS port answers (its certificate is the entry's tlsConfig's to judge; one that asks for a client
    certificate answers too: the scheduler presents one); https:// to a plain-HTTP port says so."""
    ca = TestCA(tmp_path)
    issued = ca.issue("extender", "extender", ["localhost"], server=True, ips=["127.0.0.1"])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(issued.cert, issued.key)
    if client_certificates:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(ca.path)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"https://127.0.0.1:{server.server_address[1]}/kube"
    try:
        assert extender_answer(url, timeout=5) == ""
        # verified against the CA the entry trusts (MCO's, inline as kube-scheduler's tlsConfig.caData)
        ours = configuration(entry(urlPrefix=url, enableHTTPS=True, tlsConfig={"caData": _b64(ca.path)}))
        assert mco_extender_cas(ours) == {url: ca.path.read_bytes()}
        assert extender_answers([ours], timeout=5) == {url: ""}
        (tmp_path / "other").mkdir()
        other = TestCA(tmp_path / "other")
        theirs = configuration(entry(urlPrefix=url, enableHTTPS=True, tlsConfig={"caFile": str(other.path)}))
        (answer,) = extender_answers([theirs], timeout=5).values()
        assert answer.startswith("its certificate does not verify against the CA the entry trusts"), answer
        check = judge_file(theirs, {url: answer})
        assert check.verdict is Verdict.FAIL
        assert "does not answer from here (its certificate does not verify" in check.detail
    finally:
        server.shutdown()
        server.server_close()
    plain = extender_answer(f"https://127.0.0.1:{readyz}/kube", timeout=5)
    assert plain.startswith("it answers plain HTTP, not TLS"), plain


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def test_a_password_in_the_url_is_neither_shown_nor_taken_for_the_host(readyz: int) -> None:
    url = f"http://prometheus:s3cret@127.0.0.1:{readyz}/kube"
    assert extender_answer(url, timeout=5) == ""
    refused = f"http://prometheus:s3cret@127.0.0.1:{free_port()}/kube"
    check = judge_file(configuration(entry(urlPrefix=refused)), {refused: "Connection refused"})
    assert check.verdict is Verdict.FAIL
    assert "s3cret" not in check.detail
    assert "prometheus:***@127.0.0.1" in check.detail
    assert shown_url("http://[::1/kube@x") == "<an unparsable URL with credentials>"
    assert shown_url("http://u@h:1/kube") == "http://u@h:1/kube"
