"""Build the booted test nodes' CNI plugins (bridge, host-local, loopback, portmap) from the Go module
pinned in ``go.mod`` beside this file, cached like the control-plane binaries (tests/cluster/build.py):
``$MCO_NODE_CACHE/<key>/`` (default ``~/.cache/mco/node-bin/<key>/``), the key being the sha256 of
go.mod, go.sum, this file and scripts/gobuild.py.

    python -m tests.node.build            # build if needed, show where
    python -m tests.node.build --print    # NAME=PATH lines on stdout

The kubelet and kube-proxy the nodes run come from tests/cluster (the apiserver's version); runc
and containerd from Debian (docs/testbed.md, "Kubernetes nodes").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from scripts import gobuild
from scripts.gobuild import BuildError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PLUGINS = "github.com/containernetworking/plugins"
#: Output name -> main package (each a `tool` in go.mod).
TOOLS: dict[str, str] = {
    "bridge": f"{PLUGINS}/plugins/main/bridge",
    "host-local": f"{PLUGINS}/plugins/ipam/host-local",
    "loopback": f"{PLUGINS}/plugins/main/loopback",
    "portmap": f"{PLUGINS}/plugins/meta/portmap",
}

__all__ = ["BuildError", "cni_plugins"]


def cache_key() -> str:
    return gobuild.key_of([HERE / "go.mod", HERE / "go.sum", HERE / "build.py", ROOT / "scripts" / "gobuild.py"], ROOT)


def _complete(out: Path) -> dict[str, Path] | None:
    paths = {name: out / name for name in TOOLS}
    return paths if all(p.is_file() and os.access(p, os.X_OK) for p in paths.values()) else None


def _build(out: Path) -> dict[str, Any]:
    go, goversion = gobuild.toolchain()
    mod = gobuild.modules(go, HERE, {PLUGINS})[PLUGINS]
    flags = [f"-X {PLUGINS}/pkg/utils/buildversion.BuildVersion={mod['Version']}"]
    times = {
        name: gobuild.go_build(go, HERE, pkg, out / name, flags, what=f"{name} ({pkg})") for name, pkg in TOOLS.items()
    }
    gobuild.log("node-build", f"CNI plugins {mod['Version']} built in {sum(times.values()):.1f} s into {out}")
    return {"go": goversion, "seconds": times, "modules": {PLUGINS: mod["Version"]}}


def cni_plugins(*, cache_root: Path | None = None) -> dict[str, Path]:
    """Paths of the CNI plugins, built first unless the cache has them. Raises BuildError."""
    root = Path(cache_root) if cache_root is not None else gobuild.cache_root("MCO_NODE_CACHE", "node-bin")
    return gobuild.cached(root / cache_key(), _complete, _build)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.node.build", description=__doc__.split("\n\n")[0])
    parser.add_argument("--print", action="store_true", help="print NAME=PATH lines on stdout")
    args = parser.parse_args(argv)
    start = time.monotonic()
    try:
        paths = cni_plugins()
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    gobuild.log("node-build", f"CNI plugins ready in {paths['bridge'].parent} ({time.monotonic() - start:.1f} s)")
    if args.print:
        for name, path in paths.items():
            print(f"{name}={path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
