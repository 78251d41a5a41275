"""How a daemon's main thread learns that SIGTERM or SIGINT came.

POSIX delivers a process-directed signal to any thread that does not block it, gRPC's C
threads included. CPython's C handler then only notes the signal; the Python handler runs
when the main thread next executes bytecode, which a main thread parked in an untimed
``Event.wait()`` never does: the daemon would ignore SIGTERM until systemd killed it.

Nor may the Python handler set the stop event itself: it runs on the main thread between
two bytecodes, possibly while that thread holds the event's own lock inside ``Event.wait``,
and the lock is not reentrant, so the process would deadlock. So the C handler's wakeup fd
carries the signal (:func:`signal.set_wakeup_fd` writes its number from whichever thread
took it, at once) to a relay thread, which logs it and sets the event as any other thread
would.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from types import FrameType

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class _Relay:
    """The process's one wakeup pipe and the thread that turns its signal numbers into a set event."""

    def __init__(self) -> None:
        self.stop: threading.Event | None = None
        """The event the next SIGTERM or SIGINT sets (the daemon running now)."""
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)  # the C handler must never block
        signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        self._read_end = read_end
        threading.Thread(target=self._run, name="signals", daemon=True).start()

    def _run(self) -> None:
        while True:
            for signum in os.read(self._read_end, 64):
                if signum in STOP_SIGNALS and self.stop is not None:
                    log.info("signal %s: shutting down", signal.Signals(signum).name)
                    self.stop.set()


_relay: _Relay | None = None


def _noted(_signum: int, _frame: FrameType | None) -> None:
    """The Python-level handler: nothing to do (the relay acts on the wakeup fd), but installing it
    keeps the signal from killing the process outright."""


def stop_on_signals(stop: threading.Event) -> None:
    """Set ``stop`` (and say so in the log) on SIGTERM or SIGINT, from a relay thread; call from the
    main thread. A later call moves the signals to its event."""
    global _relay  # noqa: PLW0603 - one wakeup fd per process: made once, kept
    if _relay is None:
        _relay = _Relay()
    _relay.stop = stop
    for sig in STOP_SIGNALS:
        signal.signal(sig, _noted)


def wait_for_stop(stop: threading.Event) -> None:
    """Block the calling thread until ``stop`` is set."""
    stop.wait()
