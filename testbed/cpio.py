"""The cpio "newc" archives a Linux initramfs is made of (Documentation/driver-api/early-userspace).

Written here rather than by the ``cpio`` tool so a build needs no extra host package and the
archive is the same byte for byte from the same input (every mtime is 0, owners are root).
The kernel unpacks archives laid one after another, so an archive of per-run files can be
appended to a cached one.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

MAGIC = b"070701"
TRAILER = "TRAILER!!!"
#: Each archive is padded to this, so archives can be concatenated.
BLOCK = 512


class Archive:
    """An archive being written: add entries (parents first), then :meth:`finish`."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._size = 0
        self._inode = 0
        self._names: set[str] = set()
        self._done = False

    def _entry(self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0)) -> None:
        if self._done:
            raise ValueError("archive already finished")
        if name != TRAILER:
            clean = str(PurePosixPath("/", name)).lstrip("/")
            if not clean or clean in self._names:
                raise ValueError(f"cpio entry {name!r}: empty or added twice")
            self._names.add(clean)
            name = clean
        self._inode += 1
        encoded = name.encode() + b"\0"
        fields = (self._inode, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(encoded), 0)
        header = MAGIC + b"".join(b"%08X" % value for value in fields)
        self._add(header + encoded)
        self._add(data)

    def _add(self, chunk: bytes) -> None:
        padding = -len(chunk) % 4 if chunk else 0  # header+name and data each end on 4 bytes
        self._chunks.append(chunk + b"\0" * padding)
        self._size += len(chunk) + padding

    def directory(self, name: str, mode: int = 0o755) -> None:
        self._entry(name, stat.S_IFDIR | mode)

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._entry(name, stat.S_IFREG | mode, data)

    def symlink(self, name: str, target: str) -> None:
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def char_device(self, name: str, major: int, minor: int, mode: int = 0o600) -> None:
        self._entry(name, stat.S_IFCHR | mode, rdev=(major, minor))

    def tree(self, name: str, source: Path, *, skip: tuple[str, ...] = ()) -> None:
        """``source`` (a directory) as ``name``, recursively; entries named in ``skip`` left out.
        Files keep their executable bit; symlinks stay links."""
        self.directory(name)
        for entry in sorted(source.iterdir()):
            if entry.name in skip:
                continue
            target = f"{name}/{entry.name}"
            if entry.is_symlink():
                self.symlink(target, os.readlink(entry))
            elif entry.is_dir():
                self.tree(target, entry, skip=skip)
            else:
                self.file(target, entry.read_bytes(), 0o755 if os.access(entry, os.X_OK) else 0o644)

    def finish(self) -> bytes:
        """The archive with its trailer, padded to :data:`BLOCK` bytes."""
        self._entry(TRAILER, 0)
        self._done = True
        body = b"".join(self._chunks)
        return body + b"\0" * (-len(body) % BLOCK)
