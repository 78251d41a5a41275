#!/usr/bin/env python3
"""Open-loop requests to a redis server; prints {"p50_ms", "p99_ms", "p999_ms", "requests"} as JSON.

    redis_latency.py HOST PORT RATE SECONDS [PING|SET]

PING by default; SET writes one key (with ``appendfsync always`` each reply waits for an fsync).
Each request is due at start + i / RATE and its latency counts from that moment (a stalled server
cannot hide its tail by slowing the client: no coordinated omission); the first second is a
warm-up and not counted. Standard library only: it runs on a test node's own python3.
"""

import asyncio
import json
import sys
import time

CONNECTIONS = 8
WARMUP_S = 1.0


COMMANDS = {"PING": b"PING\r\n", "SET": b"SET k v\r\n"}


async def drive(host: str, port: int, rate: float, seconds: float, command: bytes) -> list[float]:
    pairs = [await asyncio.open_connection(host, port) for _ in range(CONNECTIONS)]
    queues: list[asyncio.Queue[float]] = [asyncio.Queue() for _ in pairs]
    latencies: list[float] = []
    start = time.monotonic() + 0.05

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, due: asyncio.Queue[float]) -> None:
        while (when := await due.get()) >= 0:
            writer.write(command)
            await writer.drain()
            await reader.readuntil(b"\r\n")
            if when >= start + WARMUP_S:
                latencies.append(time.monotonic() - when)

    workers = [asyncio.create_task(connection(r, w, q)) for (r, w), q in zip(pairs, queues, strict=True)]
    for i in range(int(rate * (seconds + WARMUP_S))):
        due = start + i / rate
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        queues[i % len(queues)].put_nowait(due)
    for q in queues:
        q.put_nowait(-1.0)
    await asyncio.gather(*workers)
    for _, writer in pairs:
        writer.close()
    return latencies


def main() -> None:
    host, port, rate, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    command = COMMANDS[sys.argv[5] if len(sys.argv) > 5 else "PING"]
    ordered = sorted(asyncio.run(drive(host, port, rate, seconds, command)))

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3, 3)

    print(json.dumps({"p50_ms": at(0.5), "p99_ms": at(0.99), "p999_ms": at(0.999), "requests": len(ordered)}))


if __name__ == "__main__":
    main()
