"""A daemon stops on SIGTERM even when the kernel hands the signal to a thread other than the main one,
and even when the signal comes while the main thread holds the stop event's lock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The signal goes to a worker thread, as it may to one of gRPC's C threads: CPython's C handler
# only notes it there (and writes the wakeup fd); a Python handler would run once the main
# thread executed bytecode again, never while it waits untimed.
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


# The handler runs on the main thread between two bytecodes: here while the main thread holds the
# stop event's own (non-reentrant) lock, as it does inside Event.wait. A handler that set the
# event itself deadlocked there (seen in a collector under SIGTERM).
DAEMON_IN_WAIT = """
import logging, signal, sys, threading
from mco_py.obs.shutdown import stop_on_signals, wait_for_stop

logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
stop = threading.Event()
stop_on_signals(stop)
with stop._cond:  # the lock Event.wait holds while it checks the flag and parks
    signal.raise_signal(signal.SIGTERM)
    for _ in range(1000):  # bytecodes for the Python handler to run in, lock held
        pass
wait_for_stop(stop)
print("stopped")
"""


@pytest.mark.parametrize(
    "source",
    [DAEMON, DAEMON_IN_WAIT],
    ids=["caught-by-another-thread", "while-the-main-thread-holds-the-events-lock"],
)
def test_a_sigterm_stops_the_main_wait(source: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", source], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["signal SIGTERM: shutting down", "stopped"], done.stdout
