"""One JSON log formatter for every MCO service, set up once in ``main()``."""

from __future__ import annotations

import json
import logging
import sys
import time
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
    """Remembers which problems were already logged, so a failing source logs once, not per sample."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def first(self, key: str) -> bool:
        """True the first time ``key`` is seen (and again after :meth:`clear` for it)."""
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def clear(self, key: str) -> None:
        """Forget ``key`` (the problem went away), so a recurrence is logged again."""
        self._seen.discard(key)
