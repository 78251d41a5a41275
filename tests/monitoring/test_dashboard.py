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

from tests.cluster.cluster import free_port
from tests.extender import bodies
from tests.mco_host import ROOT, Host, running_host
from tests.roles.helpers import load_module

DASHBOARD = ROOT / "roles" / "mco_crds" / "files" / "grafana-dashboard.json"
DRAW = load_module("scripts/render_dashboard.py", "render_dashboard")
#: Grafana's variables, as a dashboard with every node selected fills them in
VARIABLES = {"$__rate_interval": "30s", "${datasource}": "prometheus", "$node": ".*"}

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None, reason="prometheus missing: run make setup as root (Debian package prometheus)"
)


def queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target, Grafana's variables filled in."""
    out = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            out.append((panel["title"], expr))
    return out


class Prometheus:
    def __init__(self, workdir: Path, host: Host) -> None:
        self.port = free_port()
        jobs = {"mco-collector": "collector", "mco-analyzer": "analyzer", "mco-scheduler-extender": "extender"}
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": [f"127.0.0.1:{host.ports[part]}"]}]}
                for job, part in jobs.items()
            ],
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
