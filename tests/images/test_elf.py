"""scripts/elf.py reads what binutils' readelf reads: the interpreter, DT_NEEDED and the run path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scripts import elf
from tests.images.archive import read
from tests.images.readelf import readelf


def test_every_elf_file_of_every_image_reads_as_readelf_reads_it(built: dict[str, Any], tmp_path: Path) -> None:
    seen = 0
    for name, info in built["images"].items():
        image = read(Path(info["archive"]))
        for path, member in image.members.items():
            if not member.isfile() or not image.data(path).startswith(elf.MAGIC):
                continue
            copy = tmp_path / f"{name}{path.replace('/', '_')}"
            copy.write_bytes(image.data(path))
            assert elf.read(copy) == readelf(copy), f"{name}: {path}"
            seen += 1
    assert seen > 20, "the images hold programs and their libraries"


# coreutils' expr has a DT_RUNPATH
@pytest.mark.parametrize("program", ["/usr/bin/python3.11", "/usr/bin/gcc", "/usr/bin/expr"])
def test_host_programs_read_as_readelf_reads_them(program: str) -> None:
    assert elf.read(Path(program)) == readelf(Path(program))


def test_a_static_program_has_no_interpreter_and_needs_nothing(built: dict[str, Any], tmp_path: Path) -> None:
    pause = tmp_path / "pause"
    pause.write_bytes(read(Path(built["images"]["pause"]["archive"])).data("/pause"))
    assert elf.read(pause) == elf.Dynamic("", (), ())


def test_what_is_not_an_elf_file_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    assert not elf.is_elf(script)
    with pytest.raises(elf.ElfError, match="not an ELF file"):
        elf.read(script)
    cut = tmp_path / "cut"
    cut.write_bytes(Path("/usr/bin/gcc").read_bytes()[:200])
    with pytest.raises(elf.ElfError):
        elf.read(cut)
    odd = tmp_path / "32bit"
    odd.write_bytes(b"\x7fELF\x01\x01" + bytes(58))
    with pytest.raises(elf.ElfError, match="64-bit"):
        elf.read(odd)
