"""A daemon stops on SIGTERM even when the kernel hands the signal to a thread other than the main one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The signal goes to a worker thread, as it may to one of gRPC's C threads: CPython only notes
# it there, and the handler runs once the main thread executes bytecode again.
DAEMON = """
import logging, signal, sys, threading, time
from mco_py.obs.shutdown import stop_on_signals, wait_for_stop

logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
stop = threading.Event()
stop_on_signals(stop)

def worker() -> None:
    time.sleep(0.2)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
    time.sleep(60)

threading.Thread(target=worker, daemon=True).start()
wait_for_stop(stop)
print("stopped")
"""


def test_a_sigterm_caught_by_another_thread_stops_the_main_wait() -> None:
    daemon = [sys.executable, "-c", DAEMON]
    done = subprocess.run(daemon, cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["signal SIGTERM: shutting down", "stopped"], done.stdout
