"""Generate the gRPC/protobuf stubs for proto/ into mco_py/rpc (or another root).

The import path is mapped so the generated modules live in the package:
proto/analyzer/v1/analyzer.proto -> mco_py/rpc/analyzer/v1/analyzer_pb2{,_grpc}.py(i).
Usage: python scripts/gen_proto.py [--out DIR]   (DIR defaults to the repo root)
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from grpc_tools import protoc  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
PACKAGE_PREFIX = "mco_py/rpc"


def stub_files(tree: Path) -> list[Path]:
    """The generated stub sources under ``tree`` (``*_pb2*.py`` and ``.pyi``; never compiled bytecode)."""
    return sorted(p for p in tree.rglob("*_pb2*.py*") if p.suffix in (".py", ".pyi"))


def generate(out: Path) -> list[Path]:
    """Generate every stub under ``out``; returns the generated files."""
    bindir = Path(sys.executable).parent
    protos = sorted(p.relative_to(PROTO_DIR) for p in PROTO_DIR.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PACKAGE_PREFIX}={PROTO_DIR}",
        f"-I{include}",
        f"--plugin=protoc-gen-mypy={bindir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={bindir / 'protoc-gen-mypy_grpc'}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_out={out}",
        f"--mypy_grpc_out={out}",
        *(f"{PACKAGE_PREFIX}/{p}" for p in protos),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    generated = stub_files(out / PACKAGE_PREFIX)
    # Packages need __init__.py so mypy and setuptools find them.
    for gen in generated:
        d = gen.parent
        while d != out / "mco_py":
            (d / "__init__.py").touch()
            d = d.parent
    return generated


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT)
    args = parser.parse_args()
    if args.out == ROOT:
        for old in stub_files(ROOT / PACKAGE_PREFIX):
            old.unlink()
    files = generate(args.out)
    for f in files:
        print(f"generated {f.relative_to(args.out)}")
    shutil.rmtree(ROOT / PACKAGE_PREFIX / "__pycache__", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
