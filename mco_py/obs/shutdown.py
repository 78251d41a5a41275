"""How a daemon's main thread learns that SIGTERM or SIGINT came.

POSIX delivers a process-directed signal to any thread that does not block it, gRPC's C
threads included. CPython's C handler then only notes the signal; the Python handler runs
when the main thread next executes bytecode. A main thread parked in an untimed
``Event.wait()`` never does, so the daemon ignored SIGTERM until systemd killed it (seen:
``mco collector`` under load, 30 s and more). The main thread therefore waits in ticks.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

log = logging.getLogger(__name__)

#: Longest a signal taken by another thread waits for the main thread to run its handler, seconds.
SIGNAL_TICK_S = 0.5


def stop_on_signals(stop: threading.Event) -> None:
    """Set ``stop`` (and say so in the log) on SIGTERM or SIGINT; call from the main thread."""

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %s: shutting down", signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)


def wait_for_stop(stop: threading.Event) -> None:
    """Block the main thread until ``stop`` is set, running pending signal handlers every tick."""
    while not stop.wait(SIGNAL_TICK_S):
        pass
