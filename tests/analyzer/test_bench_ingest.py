"""The ingest benchmark's documented command (docs/benchmarks.md) runs, and every packed sample
it streams over real gRPC is accepted (figures are the bench's business, not a test's)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_ingest_bench_streams_every_sample_and_prints_its_figures() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.analyzer.bench_analyzer", "--ingest-only", "--quick"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = re.findall(r"(\d+) nodes: (\d+)/(\d+) samples .* ([\d,]+) samples per CPU-second", done.stdout)
    assert [row[0] for row in rows] == ["1000", "10000"], done.stdout
    for _, accepted, expected, per_cpu in rows:
        assert accepted == expected, done.stdout
        assert int(per_cpu.replace(",", "")) > 0
    assert "report build" not in done.stdout, "--ingest-only stops after the ingest figures"
