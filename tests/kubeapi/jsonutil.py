"""Copying decoded JSON fast (pickle round trip: several times faster than copy.deepcopy)."""

from __future__ import annotations

import pickle
from typing import TypeVar

T = TypeVar("T")


def clone(value: T) -> T:
    """A deep copy of a decoded JSON value (dicts, lists, str, numbers, bool, None)."""
    copied: T = pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    return copied
