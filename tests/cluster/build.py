"""Build the real control-plane binaries (etcd, Kubernetes, Volcano) from Go modules.

Also copies Volcano's CRDs (``crds/`` beside the binaries, see :func:`volcano_crds`) and its installer
manifest (:func:`volcano_installer`), from the Volcano module the binaries are built from.

The programs and their versions are the ``tool`` directives of ``go.mod`` beside
this file; ``go.mod``'s header says why it replaces what it does.

Built binaries are cached in ``$MCO_CLUSTER_CACHE/<key>/`` (default
``~/.cache/mco/cluster-bin/<key>/``), where ``<key>`` is the start of the sha256 of
go.mod, go.sum, this file and scripts/gobuild.py: a change to any of them builds a new
set, an unchanged set is reused without running ``go`` (scripts/gobuild.py: markers,
locks, Go's own caches).

    python -m tests.cluster.build            # build if needed, show where
    python -m tests.cluster.build --print    # also print NAME=PATH lines (and crds=DIR) on stdout

From Python::

    from tests.cluster.build import binaries
    paths = binaries()          # {"etcd": Path(...), "kube-apiserver": Path(...), ...}

Needs Go 1.24 or newer on PATH (``tool`` directives) and the Go module proxy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scripts import gobuild
from scripts.gobuild import BuildError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CRDS = "crds"  # Volcano's CRDs (config/crd/volcano/bases of the Volcano module), beside the binaries
CRD_SOURCE = "config/crd/volcano/bases"
#: Volcano's installer manifest (the module's installer/volcano-development.yaml), beside the binaries:
#: what the volcano role installs, for the release the binaries are.
INSTALLER = "volcano-development.yaml"

# Output name -> main package (each is a `tool` in go.mod) and the module that
# carries its version.
TOOLS: dict[str, tuple[str, str]] = {
    "etcd": ("go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/server/v3"),
    "kube-apiserver": ("k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes"),
    "kube-scheduler": ("k8s.io/kubernetes/cmd/kube-scheduler", "k8s.io/kubernetes"),
    "kube-controller-manager": ("k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes"),
    "kubectl": ("k8s.io/kubernetes/cmd/kubectl", "k8s.io/kubernetes"),
    "kubelet": ("k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes"),
    "vc-scheduler": ("volcano.sh/volcano/cmd/scheduler", "volcano.sh/volcano"),
    "vc-controller-manager": ("volcano.sh/volcano/cmd/controller-manager", "volcano.sh/volcano"),
}

__all__ = ["BuildError", "binaries", "cache_key", "default_cache_root", "volcano_crds", "volcano_installer"]


def cache_key() -> str:
    return gobuild.key_of([HERE / "go.mod", HERE / "go.sum", HERE / "build.py", ROOT / "scripts" / "gobuild.py"], ROOT)


def default_cache_root() -> Path:
    return gobuild.cache_root("MCO_CLUSTER_CACHE", "cluster-bin")


def _complete(out: Path) -> dict[str, Path] | None:
    paths = {name: out / name for name in TOOLS}
    if not all(p.is_file() and os.access(p, os.X_OK) for p in paths.values()):
        return None
    if not any((out / CRDS).glob("*.yaml")) or not (out / INSTALLER).is_file():
        return None
    return paths


def _log(msg: str) -> None:
    gobuild.log("cluster-build", msg)


def _build(out: Path) -> dict[str, Any]:
    go, goversion = gobuild.toolchain()
    mods = gobuild.modules(go, HERE, {module for _, module in TOOLS.values()})
    _log(f"building {len(TOOLS)} binaries with {goversion} into {out}")
    times: dict[str, float] = {}
    start_all = time.monotonic()
    for name, (pkg, module) in TOOLS.items():
        mod = mods[module]
        commit = gobuild.origin_hash(go, mod)
        flags = gobuild.version_ldflags(mod, commit)
        if name == "etcd" and commit:  # etcd's version number is a constant in go.etcd.io/etcd/api/v3/version
            flags.append(f"-X 'go.etcd.io/etcd/api/v3/version.GitSHA={commit[:7]}'")
        _log(f"{name}: go build {pkg} ({module} {mod['Version']}) ...")
        times[name] = gobuild.go_build(
            go, HERE, pkg, out / name, flags, what=f"{name} ({pkg} from {module} {mod['Version']})"
        )
        _log(f"{name}: done in {times[name]} s ({(out / name).stat().st_size / 2**20:.1f} MiB)")
    total = round(time.monotonic() - start_all, 1)
    crds = _copy_crds(go, out)
    _log(f"all {len(TOOLS)} built in {total} s")
    return {
        "go": goversion,
        "seconds": times,
        "total_seconds": total,
        "modules": {m: mods[m]["Version"] for m in sorted(mods)},
        "crds": crds,
    }


def _copy_crds(go: str, out: Path) -> list[str]:
    """Copy Volcano's CRDs from the module cache to ``out/crds`` and its installer manifest to ``out``
    (the module was downloaded by the build); returns the CRD file names."""
    module = Path(gobuild.modules(go, HERE, {"volcano.sh/volcano"})["volcano.sh/volcano"].get("Dir", ""))
    shutil.copyfile(module / "installer" / INSTALLER, out / INSTALLER)
    src = module / CRD_SOURCE
    files = sorted(src.glob("*.yaml"))
    if not files:
        raise BuildError(f"no Volcano CRDs found in {src}")
    dest = out / CRDS
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir()
    for f in files:
        shutil.copyfile(f, dest / f.name)  # plain copy: module cache files are read-only
    _log(f"copied {len(files)} Volcano CRDs to {dest}")
    return [f.name for f in files]


def volcano_crds(bins: Mapping[str, Path]) -> Path:
    """Directory of the Volcano CRDs that go with the binaries returned by :func:`binaries`."""
    return bins["vc-scheduler"].parent / CRDS


def volcano_installer(bins: Mapping[str, Path]) -> Path:
    """Volcano's installer manifest (``installer/volcano-development.yaml``) of the release of :func:`binaries`."""
    return bins["vc-scheduler"].parent / INSTALLER


def binaries(*, cache_root: Path | None = None) -> dict[str, Path]:
    """Paths of etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, kubelet,
    vc-scheduler and vc-controller-manager; builds them first unless the cache has the set already.

    Raises BuildError when Go is missing or a build fails.
    """
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    return gobuild.cached(root / cache_key(), _complete, _build)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.cluster.build",
        description="Build (or find cached) etcd, Kubernetes and Volcano binaries for cluster tests.",
    )
    parser.add_argument("--print", action="store_true", help="print NAME=PATH lines on stdout")
    parser.add_argument("--cache-root", type=Path, help="default: $MCO_CLUSTER_CACHE or ~/.cache/mco/cluster-bin")
    args = parser.parse_args(argv)
    start = time.monotonic()
    try:
        paths = binaries(cache_root=args.cache_root)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    _log(f"binaries ready in {paths['etcd'].parent} ({time.monotonic() - start:.1f} s)")
    if args.print:
        for name, path in paths.items():
            print(f"{name}={path}")
        print(f"crds={volcano_crds(paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
