"""The guard's journal: what each file said before the guard first changed it, on disk.

Before the guard first changes a group's limit, its writer (:mod:`.writer`) records the text it
found here (a JSON file, written atomically); the writer's restore writes those texts back and
takes them out, and the file goes when nothing is left. The guard restores when it stops, when
a limit is lifted, and when it starts (a journal left behind means the last guard was killed
with its limits in place).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from mco_py.collector.cgroups import Layout, within
from mco_py.collector.guard.files import JOURNALLED_FILES
from mco_py.errors import ConfigError


def selected(group: str, name: str, *, only: str, under: str) -> bool:
    """``group``'s file ``name`` is one a restore ``only`` files of that name (or all), ``under``
    that group (or anywhere), is to write back."""
    return (not only or name == only) and (not under or within(group, under))


class Journal:
    """The files as they were before the guard changed them (``{"group/file": text}``), on disk.

    Entries a killed guard left are read at once, so they are never taken again as "originals"
    and stay until written back; an entry whose write-back fails stays too (retried later).
    """

    def __init__(self, path: Path, layout: Layout) -> None:
        self.path = path
        self.layout = layout
        self.problems: list[str] = []
        """Why entries on disk could not be read (then the file is left alone for a person)."""
        self._saved: dict[str, str] = self._load()

    def _load(self) -> dict[str, str]:
        try:
            document = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            self.problems.append(f"{self.path}: unreadable journal ({exc}); limits it recorded may remain")
            return {}
        entries = document.get("limits") if isinstance(document, dict) else None
        if not isinstance(entries, dict):
            self.problems.append(f"{self.path}: no 'limits' mapping; limits it recorded may remain")
            return {}
        out: dict[str, str] = {}
        for key, text in entries.items():
            group, _, name = str(key).rpartition("/")
            try:
                self.layout.check_group(group)
            except ConfigError:
                continue
            if name in JOURNALLED_FILES and isinstance(text, str):
                out[str(key)] = text
        return out

    def __bool__(self) -> bool:
        return bool(self._saved)

    def holds(self, name: str) -> bool:
        """True while some group's file ``name`` waits to be written back."""
        return any(key.endswith("/" + name) for key in self._saved)

    def original(self, group: str, name: str) -> str | None:
        """What ``group``'s file ``name`` held before the guard first changed it, if it did."""
        return self._saved.get(f"{self.layout.check_group(group)}/{name}")

    def remember(self, group: str, name: str, text: str) -> None:
        """Record ``text`` as what ``group``'s file ``name`` says before the guard changes it:
        once, and on disk before anything changes it."""
        key = f"{self.layout.check_group(group)}/{name}"
        if key in self._saved:
            return
        self._saved[key] = text
        self._write()

    def entries(self, *, only: str = "", under: str = "") -> list[tuple[str, str, str]]:
        """(group, file, text) of what waits to be written back; :func:`selected` picks."""
        out = []
        for key, text in self._saved.items():
            group, _, name = key.rpartition("/")
            if selected(group, name, only=only, under=under):
                out.append((group, name, text))
        return out

    def forget(self, done: Iterable[tuple[str, str]]) -> None:
        """Take out the (group, file) entries written back; the journal keeps what is left and
        goes when empty (an unreadable one stays as it is)."""
        for group, name in done:
            del self._saved[f"{group}/{name}"]
        if self.problems:
            return
        if self._saved:
            self._write()
        else:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def _write(self) -> None:
        if self.problems:  # an unreadable journal is evidence: never replace it
            raise OSError(f"{self.path} is unreadable; move it away once its limits are checked")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        document = {"cpuRoot": str(self.layout.cpu_root), "limits": self._saved}
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w") as file:
                json.dump(document, file)
                file.flush()
                os.fsync(file.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
