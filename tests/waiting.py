"""One way for tests and benchmarks to wait for something: ask again until it holds or time runs out."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(cond: Callable[[], T], what: str = "the condition", timeout: float = 30.0, every: float = 0.05) -> T:
    """``cond()``'s first truthy value, asked every ``every`` seconds; TimeoutError naming ``what``
    after ``timeout`` seconds (``cond`` may raise to give up sooner)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)
