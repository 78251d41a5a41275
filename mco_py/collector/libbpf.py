"""A small ctypes binding of libbpf1: open/load a CO-RE object, attach its programs, read a map.

Only what the block-latency backend needs. libbpf >= 1.0 returns NULL (or a
negative errno) and sets ``errno`` on failure; every failure becomes
:class:`Unavailable` with the errno text and a hint for the usual causes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
from collections.abc import Iterator
from pathlib import Path

from mco_py.collector.signals import Absence, Unavailable, errno_kind, errno_text

LIBRARY_NAMES = ("libbpf.so.1", "libbpf.so")
_c_void_p = ctypes.c_void_p


def _hint(code: int) -> str:
    if code in (errno.EPERM, errno.EACCES):
        return " (needs CAP_BPF + CAP_PERFMON, or root, and enough RLIMIT_MEMLOCK on old kernels)"
    if code == errno.ENOENT:
        return " (tracepoint or BTF type missing in this kernel)"
    return ""


class Libbpf:
    """The loaded shared library with typed function signatures."""

    def __init__(self, names: tuple[str, ...] = LIBRARY_NAMES) -> None:
        lib: ctypes.CDLL | None = None
        problems: list[str] = []
        for name in names:
            try:
                lib = ctypes.CDLL(name, use_errno=True)
                break
            except OSError as exc:
                problems.append(f"{name}: {exc}")
        if lib is None:
            raise Unavailable("libbpf not found (" + "; ".join(problems) + "); install libbpf1", Absence.UNSUPPORTED)
        self.lib = lib
        sig: dict[str, tuple[type[object] | None, list[type[object]]]] = {
            "bpf_object__open_file": (_c_void_p, [ctypes.c_char_p, _c_void_p]),
            "bpf_object__load": (ctypes.c_int, [_c_void_p]),
            "bpf_object__close": (None, [_c_void_p]),
            "bpf_object__next_program": (_c_void_p, [_c_void_p, _c_void_p]),
            "bpf_object__find_map_by_name": (_c_void_p, [_c_void_p, ctypes.c_char_p]),
            "bpf_program__name": (ctypes.c_char_p, [_c_void_p]),
            "bpf_program__attach": (_c_void_p, [_c_void_p]),
            "bpf_program__set_autoload": (ctypes.c_int, [_c_void_p, ctypes.c_bool]),
            "bpf_link__destroy": (ctypes.c_int, [_c_void_p]),
            "bpf_map__fd": (ctypes.c_int, [_c_void_p]),
            "bpf_map_get_next_key": (ctypes.c_int, [ctypes.c_int, _c_void_p, _c_void_p]),
            "bpf_map_lookup_elem": (ctypes.c_int, [ctypes.c_int, _c_void_p, _c_void_p]),
            "bpf_map_lookup_batch": (
                ctypes.c_int,
                [ctypes.c_int, _c_void_p, _c_void_p, _c_void_p, _c_void_p, _c_void_p, _c_void_p],
            ),
            "bpf_map__max_entries": (ctypes.c_uint32, [_c_void_p]),
            "libbpf_set_print": (_c_void_p, [_c_void_p]),
        }
        for name, (restype, argtypes) in sig.items():
            try:
                func = getattr(lib, name)
            except AttributeError as exc:
                raise Unavailable(f"libbpf has no {name} (libbpf >= 1.0 needed)", Absence.UNSUPPORTED) from exc
            func.restype = restype
            func.argtypes = argtypes
        # Silence libbpf's own stderr chatter; failures are reported through errno.
        lib.libbpf_set_print(None)


class _NoBatch(Exception):
    """The kernel cannot (or did not) return the whole map in one batch."""


class BpfObject:
    """A loaded BPF object with its programs attached. Close it to detach."""

    def __init__(self, path: Path, *, libbpf: Libbpf | None = None) -> None:
        self._bpf = libbpf or Libbpf()
        lib = self._bpf.lib
        if not path.is_file():
            raise Unavailable(f"{path}: BPF object missing (build it with `make -C bpf`)", Absence.UNSUPPORTED)
        self._obj: int | None = lib.bpf_object__open_file(str(path).encode(), None)
        if not self._obj:
            code = ctypes.get_errno()
            self._obj = None
            raise Unavailable(f"bpf_object__open_file({path.name}): {errno_text(code)}", errno_kind(code))
        self._links: list[int] = []
        self._batch = True
        self.programs: list[str] = []
        try:
            rc = lib.bpf_object__load(self._obj)
            if rc:
                code = -rc if rc < 0 else ctypes.get_errno()
                raise Unavailable(f"bpf_object__load({path.name}): {errno_text(code)}{_hint(code)}", errno_kind(code))
            prog: int | None = None
            while True:
                prog = lib.bpf_object__next_program(self._obj, prog)
                if not prog:
                    break
                name = (lib.bpf_program__name(prog) or b"?").decode()
                link = lib.bpf_program__attach(prog)
                if not link:
                    code = ctypes.get_errno()
                    raise Unavailable(f"bpf_program__attach({name}): {errno_text(code)}{_hint(code)}", errno_kind(code))
                self._links.append(link)
                self.programs.append(name)
        except Unavailable:
            self.close()
            raise

    def map_fd(self, name: str) -> int:
        """File descriptor of the map called ``name``."""
        return int(self._bpf.lib.bpf_map__fd(self._map(name)))

    def max_entries(self, name: str) -> int:
        """Capacity of the map called ``name``."""
        return int(self._bpf.lib.bpf_map__max_entries(self._map(name)))

    def _map(self, name: str) -> int:
        if self._obj is None:
            raise Unavailable("BPF object is closed", Absence.READ_ERROR)
        bpf_map: int | None = self._bpf.lib.bpf_object__find_map_by_name(self._obj, name.encode())
        if not bpf_map:
            raise Unavailable(f"BPF object has no map {name!r}", Absence.UNSUPPORTED)
        return bpf_map

    def dump(self, fd: int, *, key_words: int, max_entries: int) -> dict[tuple[int, ...], int]:
        """Every entry of a hash map keyed by ``key_words`` u32s with u64 values.

        One ``BPF_MAP_LOOKUP_BATCH`` call (Linux >= 5.6) instead of two syscalls
        per key; key by key where the kernel lacks it. A snapshot: keys added
        meanwhile may be missed.
        """
        if self._batch:
            try:
                words, values = self._lookup_batch(fd, key_words, max_entries)
            except _NoBatch:
                self._batch = False
            else:
                return {tuple(words[i * key_words : (i + 1) * key_words]): v for i, v in enumerate(values)}
        return {
            tuple(memoryview(key).cast("I").tolist()): value
            for key, value in self.items(fd, ctypes.sizeof(ctypes.c_uint32) * key_words)
        }

    def _lookup_batch(self, fd: int, key_words: int, max_entries: int) -> tuple[list[int], list[int]]:
        lib = self._bpf.lib
        capacity = max(1, max_entries)
        keys = (ctypes.c_uint32 * (key_words * capacity))()
        values = (ctypes.c_uint64 * capacity)()
        token = (ctypes.c_uint32 * max(2, key_words))()  # "at least 4 bytes" for hash maps, a key for others
        count = ctypes.c_uint32()
        words: list[int] = []
        out: list[int] = []
        for round_ in range(capacity + 1):  # one round unless the map grows while we read
            count.value = capacity
            start = None if round_ == 0 else ctypes.byref(token)
            rc = lib.bpf_map_lookup_batch(fd, start, ctypes.byref(token), keys, values, ctypes.byref(count), None)
            code = ctypes.get_errno() if rc else 0
            if rc and code != errno.ENOENT:  # ENOENT: this call reached the end of the map
                if code in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.ENOSPC):
                    raise _NoBatch
                raise Unavailable(f"bpf_map_lookup_batch: {errno_text(code)}", errno_kind(code))
            n = count.value
            words += memoryview(keys).cast("B").cast("I")[: key_words * n].tolist()
            out += values[:n]
            if rc:
                return words, out
        raise _NoBatch

    def items(self, fd: int, key_size: int) -> Iterator[tuple[bytes, int]]:
        """Every (key bytes, u64 value) of a hash map, key by key (a snapshot that may miss keys added meanwhile)."""
        lib = self._bpf.lib
        key = ctypes.create_string_buffer(key_size)
        next_key = ctypes.create_string_buffer(key_size)
        value = ctypes.c_uint64()
        prev: object = None
        while True:
            if lib.bpf_map_get_next_key(fd, prev, next_key) != 0:
                code = ctypes.get_errno()
                if code != errno.ENOENT:
                    raise Unavailable(f"bpf_map_get_next_key: {errno_text(code)}", errno_kind(code))
                return
            ctypes.memmove(key, next_key, key_size)
            if lib.bpf_map_lookup_elem(fd, key, ctypes.byref(value)) == 0:
                yield key.raw, int(value.value)
            prev = key

    def close(self) -> None:
        """Destroy the links (detaches the programs) and close the object (idempotent)."""
        lib = self._bpf.lib
        for link in self._links:
            lib.bpf_link__destroy(link)
        self._links = []
        if self._obj is not None:
            lib.bpf_object__close(self._obj)
            self._obj = None
