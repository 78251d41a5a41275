"""Real block I/O for the latency tests: O_DIRECT writes to a file on a disk (not tmpfs)."""

from __future__ import annotations

import mmap
import os
import tempfile
from pathlib import Path

BLOCK = 4096


def direct_writes(count: int, *, directory: Path = Path("/var/tmp"), block: int = BLOCK) -> int:
    """Write ``count`` aligned blocks with O_DIRECT (each one a block request); returns the count."""
    buf = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT needs
    buf.write(os.urandom(block))
    fd_, name = tempfile.mkstemp(prefix="mco-io-", dir=directory)
    os.close(fd_)
    fd = os.open(name, os.O_WRONLY | os.O_DIRECT)
    try:
        for i in range(count):
            os.pwrite(fd, buf, (i % 256) * block)
    finally:
        os.close(fd)
        os.unlink(name)
        buf.close()
    return count
