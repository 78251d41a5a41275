"""Build artefacts once, outside the clone, keyed by their inputs.

An artefact is a directory ``<root>/<key>`` under ``${MCO_CACHE:-~/.cache/mco}``. It is built
into ``<root>/.build-<key>-<pid>`` and renamed into place only when complete, under the lock
``<root>/build.lock``: an interrupted build is never reused (the next builder removes it), and
concurrent builders wait for one another instead of building twice.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from testbed import system

log = logging.getLogger(__name__)


def base() -> Path:
    """``${MCO_CACHE:-~/.cache/mco}``: project-owned, outside the clone."""
    return Path(os.environ.get("MCO_CACHE") or str(Path.home() / ".cache" / "mco"))


@contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold ``root``'s build lock (one builder at a time per cache root)."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / "build.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_once(target: Path, build: Callable[[Path], None], *, rebuild: bool = False) -> Path:
    """``target``, made first by ``build(scratch)`` when it is missing (or ``rebuild``).

    ``build`` fills the empty directory ``scratch``; it is renamed to ``target`` only when
    ``build`` returns.
    """
    if target.is_dir() and not rebuild:
        return target
    root = target.parent
    with locked(root):
        for stale in root.glob(".build-*"):  # every builder holds the lock: these were interrupted
            log.info("removing an interrupted build: %s", stale)
            system.remove_tree(stale)
        if target.is_dir() and not rebuild:
            return target  # another process built it while we waited for the lock
        scratch = root / f".build-{target.name}-{os.getpid()}"
        scratch.mkdir()
        started = time.monotonic()
        try:
            build(scratch)
            if target.exists():
                system.remove_tree(target)
            scratch.rename(target)
        finally:
            system.remove_tree(scratch)
        log.info("built %s in %.0f s", target, time.monotonic() - started)
    return target


def prune(root: Path, *, keep: int, pattern: str = "*") -> list[Path]:
    """Remove all but the ``keep`` newest artefacts matching ``pattern`` under ``root``."""
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    with locked(root):
        found = sorted(
            (p for p in root.glob(pattern) if p.is_dir() and not p.name.startswith(".")),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        for old in found[keep:]:
            system.remove_tree(old)
            removed.append(old)
    return removed
