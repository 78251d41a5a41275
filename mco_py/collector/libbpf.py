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
            "bpf_map__value_size": (ctypes.c_uint32, [_c_void_p]),
            "bpf_map__key_size": (ctypes.c_uint32, [_c_void_p]),
            "bpf_map__max_entries": (ctypes.c_uint32, [_c_void_p]),
            "bpf_map_lookup_batch": (
                ctypes.c_int,
                [ctypes.c_int, _c_void_p, _c_void_p, _c_void_p, _c_void_p, _c_void_p, _c_void_p],
            ),
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

    def map_shape(self, name: str) -> tuple[int, int, int]:
        """Key size, value size and capacity of the map called ``name``."""
        bpf_map, lib = self._map(name), self._bpf.lib
        return (
            int(lib.bpf_map__key_size(bpf_map)),
            int(lib.bpf_map__value_size(bpf_map)),
            int(lib.bpf_map__max_entries(bpf_map)),
        )

    def _map(self, name: str) -> int:
        if self._obj is None:
            raise Unavailable("BPF object is closed", Absence.READ_ERROR)
        bpf_map: int | None = self._bpf.lib.bpf_object__find_map_by_name(self._obj, name.encode())
        if not bpf_map:
            raise Unavailable(f"BPF object has no map {name!r}", Absence.UNSUPPORTED)
        return bpf_map

    def items(self, fd: int, key_size: int, value_size: int) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) of a hash map as bytes (a snapshot that may miss keys added meanwhile)."""
        lib = self._bpf.lib
        key = ctypes.create_string_buffer(key_size)
        next_key = ctypes.create_string_buffer(key_size)
        value = ctypes.create_string_buffer(value_size)
        prev: object = None
        while True:
            if lib.bpf_map_get_next_key(fd, prev, next_key) != 0:
                code = ctypes.get_errno()
                if code != errno.ENOENT:
                    raise Unavailable(f"bpf_map_get_next_key: {errno_text(code)}", errno_kind(code))
                return
            ctypes.memmove(key, next_key, key_size)
            if lib.bpf_map_lookup_elem(fd, key, value) == 0:
                yield key.raw, value.raw
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


class _NoBatch(Exception):
    """This kernel has no batch lookup for the map."""


class HashMapReader:
    """Reads a whole BPF hash map with as few syscalls as the kernel allows.

    ``BPF_MAP_LOOKUP_BATCH`` (Linux >= 5.6) returns up to ``chunk`` entries per
    syscall; key by key (two syscalls per key) where the kernel lacks it. On a
    VM each ``bpf()`` call is costly when caches are cold, which is the usual
    state at one read a second. Buffers are allocated once.
    """

    def __init__(self, obj: BpfObject, name: str, *, chunk: int = 32) -> None:
        self._obj = obj
        self._lib = obj._bpf.lib
        self.fd = obj.map_fd(name)
        self.key_size, self.value_size, capacity = obj.map_shape(name)
        self._chunk = max(1, min(chunk, capacity))
        self._rounds = capacity // self._chunk + 2
        self._keys = ctypes.create_string_buffer(self.key_size * self._chunk)
        self._values = ctypes.create_string_buffer(self.value_size * self._chunk)
        self._token = ctypes.create_string_buffer(max(4, self.key_size))  # hash maps: at least 4 bytes
        self._count = ctypes.c_uint32()
        self.batch = True
        """False once the kernel refused a batch lookup (then key by key)."""

    def read(self) -> list[tuple[bytes, bytes]]:
        """Every (key, value) as bytes: a snapshot that may miss keys added meanwhile."""
        if self.batch:
            try:
                return self._read_batch()
            except _NoBatch:
                self.batch = False
        return list(self._obj.items(self.fd, self.key_size, self.value_size))

    def _read_batch(self) -> list[tuple[bytes, bytes]]:
        out: list[tuple[bytes, bytes]] = []
        keys, values = memoryview(self._keys), memoryview(self._values)
        ks, vs = self.key_size, self.value_size
        start: object = None
        for _ in range(self._rounds):
            self._count.value = self._chunk
            rc = self._lib.bpf_map_lookup_batch(
                self.fd, start, self._token, self._keys, self._values, ctypes.byref(self._count), None
            )
            code = ctypes.get_errno() if rc else 0
            if rc and code != errno.ENOENT:  # ENOENT: this call reached the end of the map
                if code in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise _NoBatch
                if code == errno.ENOSPC:  # one hash bucket holds more than a chunk: read this time key by key
                    return list(self._obj.items(self.fd, ks, vs))
                raise Unavailable(f"bpf_map_lookup_batch: {errno_text(code)}", errno_kind(code))
            out += [
                (keys[i * ks : (i + 1) * ks].tobytes(), values[i * vs : (i + 1) * vs].tobytes())
                for i in range(self._count.value)
            ]
            if rc:
                return out
            start = self._token
        return out
