"""A real ``mco collector`` process streaming to a gRPC server that goes away and comes back.

The in-process stream tests share one grpc import with the rest of the suite; this one
runs the collector as users do, so it also covers the gRPC settings the collector
chooses at start-up (``GRPC_EXPERIMENTS``).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time

from .test_stream import Recorder, serve

MCO = [sys.executable, "-m", "mco_py.cli", "collector"]


def test_collector_process_streams_and_catches_up_after_the_analyzer_restarts() -> None:
    first = Recorder()
    server, port = serve(first)
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    env["PYTHONFAULTHANDLER"] = "1"  # a hung stop is shown with every thread's stack (SIGABRT below)
    proc = subprocess.Popen(
        [
            *MCO,
            "--stream-analyzers",
            f"127.0.0.1:{port}",
            "--node-name",
            "restart-node",
            "--interval",
            "0.2",
            "--bio-backend",
            "diskstats",
            "--metrics-host",
            "127.0.0.1",
            "--metrics-port",
            "0",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    log: list[str] = []
    reader = threading.Thread(target=lambda: log.extend(proc.stderr or ()), daemon=True)
    reader.start()
    second = Recorder()
    try:
        before = first.wait_samples(3, timeout=60)
        assert {s.node for s in before} == {"restart-node"}
        server.stop(None).wait()
        time.sleep(1.0)  # samples taken meanwhile wait in the collector's buffer
        server, _ = serve(second, port)
        after = second.wait_samples(6, timeout=60)
        for run in (first.samples(), after):
            stamps = [s.timestamp_unix_nanos for s in run]
            assert len(set(stamps)) == len(stamps), "a sample was delivered twice to the same analyzer run"
        # at least once: a batch the first server took but never acked is sent again (the analyzer drops it)
        sent = sorted({s.timestamp_unix_nanos for s in first.samples() + after})
        gap = [b - a for a, b in itertools.pairwise(sent)]
        assert max(gap) < 1.0e9, "samples taken while the analyzer was down were lost"
    finally:
        server.stop(None)
        proc.send_signal(signal.SIGTERM)
        try:
            code: int | None = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            proc.wait(timeout=30)
            code = None
        reader.join(10)
        proc.stderr.close()
    assert code is not None, "the collector did not stop within 30 s of SIGTERM:\n" + "".join(log)
    assert code == 0, "".join(log)
    assert not any("Traceback" in line for line in log), "".join(log)
