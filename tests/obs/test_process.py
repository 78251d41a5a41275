"""The process policy: what each service's tune() sets, and the analyzer's GC pause."""

from __future__ import annotations

import subprocess
import sys
import weakref

import pytest

from mco_py.obs.process import FULL_COLLECTION_EVERY, gc_paused

PROBE = """
import gc, sys
from mco_py.obs import process
before = gc.get_threshold()
tuning = process.tune(sys.argv[1])
print(gc.get_freeze_count() > 0, gc.get_threshold() != before, tuning.malloc_tuned, tuning.trim is not None)
"""


@pytest.mark.parametrize(
    ("service", "expected"),
    [
        ("extender", "True True True True"),  # frozen, fewer young collections, large blocks kept, trimmed later
        ("collector", "True False False False"),  # start-up frozen, nothing else
        ("analyzer", "False False False False"),  # its report builds pause and promote instead
    ],
)
def test_each_service_gets_its_policy(service: str, expected: str) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE, service], capture_output=True, text=True, check=True)
    assert out.stdout.split() == expected.split()


def test_garbage_cycles_promoted_past_the_young_collections_are_still_freed() -> None:
    class Node:
        other: object = None

    first, second = Node(), Node()
    first.other, second.other = second, first  # a cycle only the cyclic GC can free
    alive = weakref.ref(first)
    del first, second
    for _ in range(FULL_COLLECTION_EVERY):  # each pause ends with a promotion (or the periodic full collection)
        with gc_paused():
            pass
        if alive() is None:
            break
    assert alive() is None
