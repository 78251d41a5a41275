"""Whether files a service loaded have changed since: the one stamp its reloaders compare."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

#: A file's identity and version: device, inode, modification time (ns), size; all 0 and size -1
#: when it cannot be stat'ed (missing, or no path given).
Stamp = tuple[int, int, int, int]
MISSING: Stamp = (0, 0, 0, -1)


def file_stamp(path: str | Path | None) -> Stamp:
    """``path``'s :data:`Stamp` (a file replaced by a rename, as installers do, gets a new inode)."""
    if not path:
        return MISSING
    try:
        st = os.stat(path)
    except OSError:
        return MISSING
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def file_stamps(paths: Iterable[str | Path | None]) -> tuple[Stamp, ...]:
    """The :data:`Stamp` of each of ``paths``, in order: unequal to an earlier one when any changed."""
    return tuple(file_stamp(path) for path in paths)
