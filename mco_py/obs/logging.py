"""One JSON log formatter for every MCO service, set up once in ``main()``."""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

#: Attributes every LogRecord has; anything else came from ``extra=`` and is logged as a field.
_STANDARD = frozenset(vars(logging.LogRecord("x", logging.INFO, "x", 0, "x", None, None))) | {"message", "asctime"}

MAX_FIELD_CHARS = 2000


def truncate(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    """Cut ``text`` to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more chars]"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the ``extra=`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": truncate(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value if isinstance(value, int | float | bool | type(None)) else truncate(str(value))
        if record.exc_info:
            out["exception"] = truncate(self.formatException(record.exc_info), 8000)
        return json.dumps(out, ensure_ascii=False)


def setup_logging(level: str = "info", *, stream: TextIO | None = None) -> None:
    """Send every log record to ``stream`` (default stderr) as JSON lines."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class OnceFilter:
    """Remembers which problems were already logged, so a failing source logs once, not per sample.

    Holds at most ``max_keys`` keys (the oldest is forgotten first), so keys a peer chooses
    cannot grow it without bound; a forgotten key is logged again when it recurs.
    """

    def __init__(self, max_keys: int = 1024) -> None:
        self._seen: dict[str, None] = {}
        self._max_keys = max_keys

    def first(self, key: str) -> bool:
        """True the first time ``key`` is seen (and again after :meth:`clear` for it)."""
        if key in self._seen:
            return False
        if len(self._seen) >= self._max_keys:
            del self._seen[next(iter(self._seen))]
        self._seen[key] = None
        return True

    def clear(self, key: str) -> None:
        """Forget ``key`` (the problem went away), so a recurrence is logged again."""
        self._seen.pop(key, None)

    def __len__(self) -> int:
        return len(self._seen)


class RateLimit:
    """At most ``burst`` log lines per ``interval`` seconds; counts what it held back.

    For lines whose wording a peer controls (names it sends): however many distinct
    problems arrive, the log grows by a bounded number of lines per interval.
    """

    def __init__(self, burst: int, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._burst = burst
        self._interval = interval
        self._clock = clock
        self._window_start = -math.inf
        self._used = 0
        self._held_back = 0

    def allow(self) -> int | None:
        """None when over the budget (counted); else the number of lines held back since the last one allowed."""
        now = self._clock()
        if now - self._window_start >= self._interval:
            self._window_start, self._used = now, 0
        if self._used >= self._burst:
            self._held_back += 1
            return None
        self._used += 1
        held, self._held_back = self._held_back, 0
        return held
