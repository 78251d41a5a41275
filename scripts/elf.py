"""What the dynamic loader reads from an x86-64 ELF file: its interpreter (PT_INTERP), the shared
libraries it needs (DT_NEEDED) and where it says to look for them (DT_RUNPATH, else DT_RPATH).
scripts/build_images.py puts exactly these into an image, so it reads them itself rather than
asking ``ldd``, which runs the host's loader and cannot resolve a program whose libraries the
host lacks."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"\x7fELF"
_ELFCLASS64, _ELFDATA2LSB = 2, 1
_PT_LOAD, _PT_DYNAMIC, _PT_INTERP = 1, 2, 3
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_RPATH, _DT_RUNPATH = 0, 1, 5, 15, 29
_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_DYN = struct.Struct("<qQ")


class ElfError(ValueError):
    """Not a 64-bit little-endian ELF file, or one whose headers point outside it."""


@dataclass(frozen=True)
class Dynamic:
    interpreter: str
    """The program interpreter (empty: a static program or a library)."""
    needed: tuple[str, ...]
    """DT_NEEDED entries, in order."""
    runpath: tuple[str, ...]
    """Directories of DT_RUNPATH (else DT_RPATH), ``$ORIGIN`` left as written."""


def is_elf(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(4) == MAGIC


def _cstr(data: bytes, offset: int) -> str:
    end = data.find(b"\0", offset)
    if offset >= len(data) or end < 0:
        raise ElfError(f"string at {offset} runs past the end of the file")
    return data[offset:end].decode()


def read(path: Path) -> Dynamic:
    """The dynamic-linking facts of the ELF file at ``path``. Raises ElfError."""
    data = path.read_bytes()
    if len(data) < _HEADER.size or data[:4] != MAGIC:
        raise ElfError(f"{path}: not an ELF file")
    ident, *_, phoff, _shoff, _flags, _ehsize, phentsize, phnum, _she, _shn, _shstr = _HEADER.unpack_from(data)
    if ident[4] != _ELFCLASS64 or ident[5] != _ELFDATA2LSB:
        raise ElfError(f"{path}: not a 64-bit little-endian ELF file")
    if phentsize != _PHDR.size or phoff + phnum * phentsize > len(data):
        raise ElfError(f"{path}: program headers outside the file")
    headers = [_PHDR.unpack_from(data, phoff + i * phentsize) for i in range(phnum)]
    interpreter, dynamic = "", None
    for p_type, _f, offset, _vaddr, _paddr, filesz, _memsz, _align in headers:
        if p_type == _PT_INTERP:
            interpreter = _cstr(data, offset)
        elif p_type == _PT_DYNAMIC:
            dynamic = (offset, filesz)
    if dynamic is None:
        return Dynamic(interpreter, (), ())
    entries: list[tuple[int, int]] = []
    offset, size = dynamic
    for pos in range(offset, min(offset + size, len(data) - _DYN.size + 1), _DYN.size):
        tag, value = _DYN.unpack_from(data, pos)
        if tag == _DT_NULL:
            break
        entries.append((tag, value))
    strtab = next((value for tag, value in entries if tag == _DT_STRTAB), None)
    if strtab is None:
        raise ElfError(f"{path}: a dynamic section without a string table")
    # DT_STRTAB is an address: the file offset is where the loadable segment holding it starts
    load = [(vaddr, off, filesz) for p_type, _f, off, vaddr, _p, filesz, _m, _a in headers if p_type == _PT_LOAD]
    base = next((off + strtab - vaddr for vaddr, off, filesz in load if vaddr <= strtab < vaddr + filesz), None)
    if base is None:
        raise ElfError(f"{path}: the string table's address {strtab:#x} is in no loadable segment")
    needed = tuple(_cstr(data, base + value) for tag, value in entries if tag == _DT_NEEDED)
    runpath = [_cstr(data, base + value) for tag, value in entries if tag == _DT_RUNPATH]
    if not runpath:
        runpath = [_cstr(data, base + value) for tag, value in entries if tag == _DT_RPATH]
    return Dynamic(interpreter, needed, tuple(d for item in runpath for d in item.split(":") if d))
