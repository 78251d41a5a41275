"""The Grafana dashboard's queries return data from a real Prometheus scraping a running MCO.

Prometheus is Debian's `prometheus` package (`make setup` installs it as root). The three parts
run as processes on this host (tests.mco_host, the collector on this machine's /proc and /sys);
the test drives block I/O and scheduler requests so that every panel has something to show.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml

from tests import waiting
from tests.cluster.cluster import free_port
from tests.extender import bodies
from tests.mco_host import ROOT, Host, running_host
from tests.roles.helpers import load_module, render_with_inventory

DASHBOARD = ROOT / "roles" / "mco_crds" / "files" / "grafana-dashboard.json"
DRAW = load_module("scripts/render_dashboard.py", "render_dashboard")
#: Grafana's variables, as a dashboard with every node selected fills them in
VARIABLES = {"$__rate_interval": "30s", "${datasource}": "prometheus", "$node": ".*"}

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="prometheus missing: run make setup as root (Debian package prometheus)"
)


def queries(node: str = VARIABLES["$node"]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target, Grafana's variables filled in (``$node``: ``node``)."""
    out = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for name, value in {**VARIABLES, "$node": node}.items():
                expr = expr.replace(name, value)
            out.append((panel["title"], expr))
    return out


#: What the Prometheus Operator adds to every ServiceMonitor's scrape config (role endpointslice):
#: an endpoint naming its Node gives the target label node, one naming its Pod the label pod.
OPERATOR_RELABELING = [
    {
        "source_labels": [
            "__meta_kubernetes_endpointslice_address_target_kind",
            "__meta_kubernetes_endpointslice_address_target_name",
        ],
        "separator": ";",
        "regex": f"{kind};(.*)",
        "replacement": "${1}",
        "target_label": label,
    }
    for kind, label in (("Node", "node"), ("Pod", "pod"))
]
#: The Services' names -> which part answers behind them (tests.mco_host's ports)
PARTS = {"mco-collector": "collector", "mco-analyzer": "analyzer", "mco-scheduler-extender": "extender"}
#: ServiceMonitor port names (roles/mco_crds/templates/servicemonitors.yaml.j2)
SCRAPED_PORTS = {"mco-collector": "metrics", "mco-analyzer": "metrics", "mco-scheduler-extender": "http"}


def scrape_configs(workdir: Path, host: Host, node: str = "node-1") -> list[dict[str, Any]]:
    """One job per Service, its targets from the EndpointSlices mco_crds renders for this host (the
    collector's node is ``node``), each with the meta labels Prometheus's endpointslice discovery
    gives it and the operator's relabeling: the targets Prometheus gets from the ServiceMonitors."""
    inventory = {
        "all": {
            "vars": {
                "mco_collector_metrics_port": host.ports["collector"],
                "mco_analyzer_metrics_port": host.ports["analyzer"],
                "mco_scheduler_extender_port": host.ports["extender"],
            },
            "children": {
                "mco_control": {"hosts": {"ctl-1": {"ansible_host": "127.0.0.1"}}},
                "mco_nodes": {"hosts": {"wk-1": {"ansible_host": "127.0.0.1", "mco_node_name": node}}},
            },
        }
    }
    text = render_with_inventory("mco_crds", "services.yaml.j2", workdir / "services.yaml", inventory)
    slices = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "EndpointSlice"]
    jobs = []
    for service, port_name in SCRAPED_PORTS.items():
        groups = []
        for es in slices:
            if es["metadata"]["labels"]["kubernetes.io/service-name"] != service:
                continue
            port = next(p["port"] for p in es["ports"] if p["name"] == port_name)
            for endpoint in es["endpoints"]:
                labels = {}
                if "targetRef" in endpoint:
                    labels["__meta_kubernetes_endpointslice_address_target_kind"] = endpoint["targetRef"]["kind"]
                    labels["__meta_kubernetes_endpointslice_address_target_name"] = endpoint["targetRef"]["name"]
                host_port = f"[{endpoint['addresses'][0]}]" if es["addressType"] == "IPv6" else endpoint["addresses"][0]
                groups.append({"targets": [f"{host_port}:{port}"], "labels": labels})
        assert groups, f"no EndpointSlice endpoint for {service}: {text}"
        jobs.append({"job_name": service, "static_configs": groups, "relabel_configs": OPERATOR_RELABELING})
    return jobs


class Prometheus:
    def __init__(self, workdir: Path, host: Host) -> None:
        self.port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": scrape_configs(workdir, host),
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        with (workdir / "prometheus.log").open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    "prometheus",
                    f"--config.file={workdir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={workdir / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as response:
            answer = json.loads(response.read())
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture
def scraped(tmp_path: Path) -> Iterator[tuple[Host, Prometheus]]:
    with running_host(tmp_path, real_host=True, bio_backend="auto") as host:
        prometheus = Prometheus(tmp_path, host)
        try:
            yield host, prometheus
        finally:
            prometheus.close()


def _extender_requests(host: Host) -> None:
    for route in ("/kube/filter", "/kube/prioritize"):
        request = urllib.request.Request(
            f"http://127.0.0.1:{host.ports['extender']}{route}",
            data=bodies.dumps(bodies.kube_args(None, ["node-1"])),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="the latency histogram needs eBPF or tracefs (root)")
def test_every_panel_query_returns_data(scraped: tuple[Host, Prometheus], tmp_path: Path) -> None:
    host, prometheus = scraped
    scratch = tmp_path / "io"
    started = time.time()
    empty: list[tuple[str, str]] = queries()
    deadline = time.monotonic() + 60
    while empty and time.monotonic() < deadline:
        # block I/O for the latency panel (O_DIRECT: it reaches the disk), requests for the extender's
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={scratch}", "bs=4k", "count=2000", "oflag=direct"],
            capture_output=True,
            check=True,
            timeout=60,
        )
        time.sleep(1)
        try:
            _extender_requests(host)
            empty = [(title, expr) for title, expr in empty if not prometheus.query(expr)]
        except OSError:  # the extender or Prometheus still starting
            continue
    assert not empty, f"panels without data: {json.dumps(empty, indent=1)}"
    # what scripts/render_dashboard.py draws for docs/operations.md, from these very series
    time.sleep(3)  # a range query's last step (2 s) must reach past the scrape the instant queries saw
    panels = DRAW.collect(prometheus.port, started, time.time())
    assert [p.title for p in panels] == [p["title"] for p in json.loads(DASHBOARD.read_text())["panels"]]
    assert all(p.series for p in panels), [p.title for p in panels if not p.series]
    svg = ElementTree.fromstring(DRAW.render(panels, caption="test"))
    assert len(svg.findall("{http://www.w3.org/2000/svg}polyline")) >= len(panels)


def _answer(prometheus: Prometheus, expr: str) -> list[dict[str, Any]]:
    """The query's result; none while Prometheus is still starting."""
    try:
        return prometheus.query(expr)
    except OSError:
        return []


#: Collector series the node filter must select on the fixture host (frozen: no block I/O to time;
#: the block latency panel's filter is exercised by test_every_panel_query_returns_data)
COLLECTOR_METRICS = ("mco_node_psi_",)


#: a collector signal next to the analyzer's level of the same node (docs/operations.md#scraping)
JOIN = 'mco_node_psi_io_some_avg10_raw * on (node) group_left () mco_node_interference_level{dimension=""}'


def test_the_node_filter_selects_collector_series(tmp_path: Path) -> None:
    """The collector's series carry the node label the ServiceMonitor's targets get from mco_crds'
    EndpointSlices, so the dashboard's node filter selects them and they join the analyzer's."""
    with running_host(tmp_path) as host:  # the collector on the fixture host tree, node "node-1"
        prometheus = Prometheus(tmp_path, host)
        try:
            collector = [(t, q) for t, q in queries("node-1") if any(m in q for m in COLLECTOR_METRICS)]
            assert len(collector) == 3, "the PSI panel's three queries filter by node"
            waiting.wait_until(
                lambda: all(_answer(prometheus, q) for _, q in collector), "collector panels for node-1", 60.0, 0.5
            )
            for title, expr in collector:
                assert {r["metric"].get("node") for r in prometheus.query(expr)} == {"node-1"}, (title, expr)
            for title, expr in [(t, q) for t, q in queries("node-2") if any(m in q for m in COLLECTOR_METRICS)]:
                assert prometheus.query(expr) == [], (title, expr)
            # a collector signal next to the analyzer's level for the same node (the report's node name)
            joined = waiting.wait_until(
                lambda: _answer(prometheus, JOIN),
                "collector and analyzer series joined on node",
                60.0,
                0.5,
            )
            assert [r["metric"]["node"] for r in joined] == ["node-1"]
            # the analyzer's own node label is kept as it is (its target names no Node)
            assert prometheus.query('{job="mco-analyzer", exported_node!=""}') == []
        finally:
            prometheus.close()


def test_the_drawing_of_the_dashboard() -> None:
    panels = [
        DRAW.Panel("A & B", "ms", (DRAW.Series("n1 <cpu>", ((0.0, 1.0), (10.0, 3.0))),)),
        DRAW.Panel("empty", "", ()),
        DRAW.Panel("flat", "percent", (DRAW.Series("x", ((0.0, 0.0), (5.0, 0.0))),)),
    ]
    svg = ElementTree.fromstring(DRAW.render(panels, caption="caption"))
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert "A & B" in texts
    assert "n1 <cpu>" in texts
    assert "no data" in texts
    assert "3 ms" in texts
    assert DRAW.legend("{{instance}} {{ kind }}", {"instance": "h:1", "kind": "p99"}) == "h:1 p99"
    assert DRAW.legend("{{missing}}", {}) == "value"
    titles = [title for title, _, _ in DRAW.panels_of(json.loads(DASHBOARD.read_text()))]
    assert len(titles) == len(json.loads(DASHBOARD.read_text())["panels"])


def test_the_dashboard_is_grafana_json_with_its_variables() -> None:
    doc = json.loads(DASHBOARD.read_text())
    assert doc["uid"] == "mco-interference"
    assert {v["name"] for v in doc["templating"]["list"]} == {"datasource", "node"}
    ids = [panel["id"] for panel in doc["panels"]]
    assert len(ids) == len(set(ids))
    for panel in doc["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
