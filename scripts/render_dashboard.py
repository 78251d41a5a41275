"""Draw MCO's Grafana dashboard as an SVG from a real Prometheus scraping a running MCO.

Grafana itself is not packaged for Debian; this draws each panel of
roles/mco_crds/files/grafana-dashboard.json (its title, unit and every target's series, from
``query_range``) as a small line chart, in the dashboard's order. ``main`` runs the three
parts on this host (tests.mco_host: the collector on this machine's /proc and /sys) and
Debian's Prometheus, drives block I/O, scheduler requests and a CPU and I/O antagonist for
about two minutes, then writes docs/img/dashboard.svg. Run as root (the eBPF latency
histogram): ``.venv/bin/python scripts/render_dashboard.py``.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "roles" / "mco_crds" / "files" / "grafana-dashboard.json"
OUT = ROOT / "docs" / "img" / "dashboard.svg"
VARIABLES = {"$__rate_interval": "30s", "${datasource}": "prometheus", "$node": ".*"}
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
PANEL_W, PANEL_H, PAD = 580, 230, 20
MAX_SERIES = 8


@dataclass(frozen=True, slots=True)
class Series:
    """One line: its legend and (seconds since the start, value) points."""

    label: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class Panel:
    title: str
    unit: str
    series: tuple[Series, ...]


def panels_of(dashboard: dict[str, Any]) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(title, unit, [(PromQL with Grafana's variables filled in, legend format)]) per panel."""
    out = []
    for panel in dashboard["panels"]:
        targets = []
        for target in panel["targets"]:
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            targets.append((expr, target.get("legendFormat", "")))
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        out.append((panel["title"], unit, targets))
    return out


def legend(template: str, labels: dict[str, str]) -> str:
    """Grafana's ``{{label}}`` legend format filled in."""
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m[1], ""), template).strip() or "value"


def _fmt(value: float) -> str:
    if value == 0 or 0.01 <= abs(value) < 10_000:
        return f"{value:.3g}"
    return f"{value:.2e}"


def render(panels: list[Panel], *, columns: int = 2, caption: str = "") -> str:
    """The SVG document: panels in a grid, each with its title, y range and legend."""
    rows = (len(panels) + columns - 1) // columns
    width = columns * (PANEL_W + PAD) + PAD
    height = rows * (PANEL_H + PAD) + PAD + (24 if caption else 0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="#f7f8fa"/>',
    ]
    for index, panel in enumerate(panels):
        x0 = PAD + (index % columns) * (PANEL_W + PAD)
        y0 = PAD + (index // columns) * (PANEL_H + PAD)
        parts.append(_panel(panel, x0, y0))
    if caption:
        parts.append(f'<text x="{PAD}" y="{height - 8}" fill="#555">{escape(caption)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _panel(panel: Panel, x0: float, y0: float) -> str:
    plot_x, plot_y, plot_w, plot_h = x0 + 60, y0 + 28, PANEL_W - 200, PANEL_H - 50
    out = [
        f'<rect x="{x0}" y="{y0}" width="{PANEL_W}" height="{PANEL_H}" fill="#fff" stroke="#d0d4da"/>',
        f'<text x="{x0 + 8}" y="{y0 + 17}" font-size="12" font-weight="bold">{escape(panel.title)}</text>',
        f'<rect x="{plot_x}" y="{plot_y}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#e3e6ea"/>',
    ]
    points = [p for s in panel.series for p in s.points]
    if not points:
        out.append(f'<text x="{plot_x + 10}" y="{plot_y + plot_h / 2}" fill="#999">no data</text>')
        return "\n".join(out)
    t_max = max(t for t, _ in points) or 1.0
    low = min(0.0, *(v for _, v in points))
    high = max(v for _, v in points)
    high = high if high > low else low + 1.0
    unit = f" {panel.unit}" if panel.unit not in ("", "short", "none") else ""
    out.append(f'<text x="{plot_x - 4}" y="{plot_y + 8}" text-anchor="end">{_fmt(high)}{escape(unit)}</text>')
    out.append(f'<text x="{plot_x - 4}" y="{plot_y + plot_h}" text-anchor="end">{_fmt(low)}</text>')
    out.append(f'<text x="{plot_x}" y="{plot_y + plot_h + 14}" fill="#777">0 s</text>')
    end_label = f'<text x="{plot_x + plot_w}" y="{plot_y + plot_h + 14}" fill="#777" text-anchor="end">'
    out.append(f"{end_label}{t_max:.0f} s</text>")
    for number, series in enumerate(panel.series[:MAX_SERIES]):
        color = COLORS[number % len(COLORS)]
        xy = " ".join(
            f"{plot_x + plot_w * t / t_max:.1f},{plot_y + plot_h * (1 - (v - low) / (high - low)):.1f}"
            for t, v in series.points
        )
        out.append(f'<polyline points="{xy}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        ly = plot_y + 10 + number * 15
        out.append(f'<rect x="{plot_x + plot_w + 10}" y="{ly - 8}" width="10" height="3" fill="{color}"/>')
        out.append(f'<text x="{plot_x + plot_w + 24}" y="{ly - 3}">{escape(series.label[:22])}</text>')
    return "\n".join(out)


def query_range(port: int, expr: str, start: float, end: float, step: float = 2.0) -> list[dict[str, Any]]:
    """Prometheus's ``/api/v1/query_range`` result for ``expr``."""
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query_range?{params}", timeout=30) as response:
        answer = json.loads(response.read())
    if answer.get("status") != "success":
        raise RuntimeError(f"{expr}: {answer}")
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def collect(port: int, start: float, end: float) -> list[Panel]:
    """Every panel of the dashboard with the series Prometheus has for it between start and end."""
    panels = []
    for title, unit, targets in panels_of(json.loads(DASHBOARD.read_text())):
        series = []
        for expr, fmt in targets:
            for item in query_range(port, expr, start, end):
                points = tuple(
                    (float(t) - start, float(v)) for t, v in item["values"] if v not in ("NaN", "+Inf", "-Inf")
                )
                if points:
                    series.append(Series(legend(fmt, item["metric"]), points))
        panels.append(Panel(title, unit, tuple(series)))
    return panels


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from tests.mco_host import running_host  # noqa: PLC0415 - a development tool on the test harness
    from tests.monitoring.test_dashboard import Prometheus, _extender_requests  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp, running_host(Path(tmp), real_host=True, bio_backend="auto") as host:
        prometheus = Prometheus(Path(tmp), host)
        try:
            start = time.time()
            stress: subprocess.Popen[bytes] | None = None
            while time.time() - start < 120:
                elapsed = time.time() - start
                if stress is None and elapsed > 40:  # an antagonist for a minute: pressure and levels move
                    stress = subprocess.Popen(["stress-ng", "--cpu", "2", "--io", "1", "--timeout", "50s"])
                subprocess.run(
                    ["dd", "if=/dev/zero", f"of={tmp}/io", "bs=4k", "count=2000", "oflag=direct"],
                    capture_output=True,
                    check=True,
                    timeout=60,
                )
                with contextlib.suppress(OSError):  # the extender still starting
                    _extender_requests(host)
                time.sleep(1)
            if stress is not None:
                stress.wait(60)
            panels = collect(prometheus.port, start, time.time())
        finally:
            prometheus.close()
    caption = (
        "MCO's Grafana dashboard drawn from a real Prometheus scraping MCO on one host (scripts/render_dashboard.py)"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(render(panels, caption=caption))
    empty = [p.title for p in panels if not p.series]
    print(f"wrote {OUT} ({len(panels)} panels{'; without data: ' + ', '.join(empty) if empty else ''})")
    return 1 if empty else 0


if __name__ == "__main__":
    sys.exit(main())
