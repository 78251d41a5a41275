"""Errors the test-bed raises on purpose; the CLI prints them without a traceback."""

from __future__ import annotations


class TestbedError(Exception):
    """Something the user can fix; the message says what is wrong and how to fix it."""

    __test__ = False  # not a pytest test class despite the name
