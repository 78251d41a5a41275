"""Time the booted-node lifecycle: image lookup, `up` of N nodes one by one, `down-all`.

Run as root (builds the image first if missing):
    PYTHONPATH=. .venv/bin/python bench/testbed_lifecycle.py [NODES] [ROUNDS]
Prints one line per round and the median; record the figures in docs/benchmarks.md.
"""

from __future__ import annotations

import statistics
import sys
import time

from testbed import image, nodes


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    root = image.ensure_image()
    bed = nodes.Bed(f"bench{int(time.time()) % 100000}")
    ups: list[float] = []
    downs: list[float] = []
    try:
        for number in range(1, rounds + 1):
            per_node = []
            for index in range(count):
                started = time.perf_counter()
                bed.up(f"n{index}", image=root)
                per_node.append(time.perf_counter() - started)
            started = time.perf_counter()
            bed.down_all()
            downs.append(time.perf_counter() - started)
            ups.extend(per_node)
            print(f"round {number}: up {' '.join(f'{t:.2f}' for t in per_node)} s; down-all {downs[-1]:.2f} s")
    finally:
        bed.down_all()
    print(
        f"median: up one node {statistics.median(ups):.2f} s,"
        f" down-all of {count} nodes {statistics.median(downs):.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
