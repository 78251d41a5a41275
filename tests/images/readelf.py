"""What binutils' ``readelf`` says about an ELF file: the tests' own reading, to hold
scripts/elf.py and the images to."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from scripts import elf


def readelf(path: Path) -> elf.Dynamic:
    """The interpreter, DT_NEEDED and run path from ``readelf -ldW`` (binutils, installed with gcc)."""
    if shutil.which("readelf") is None:
        pytest.fail("readelf (binutils, with gcc in requirements/debian.txt) is not installed: run make setup as root")
    out = subprocess.run(["readelf", "-ldW", str(path)], capture_output=True, text=True, check=True).stdout
    interp = re.search(r"\[Requesting program interpreter: (.*)\]", out)
    runpath = re.findall(r"\(RUNPATH\)\s+Library runpath: \[(.*)\]", out) or re.findall(
        r"\(RPATH\)\s+Library rpath: \[(.*)\]", out
    )
    return elf.Dynamic(
        interpreter=interp[1] if interp else "",
        needed=tuple(re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", out)),
        runpath=tuple(d for item in runpath for d in item.split(":") if d),
    )
