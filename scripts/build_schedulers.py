"""Build MCO's schedulers: Volcano's vc-scheduler with mco-plugin compiled in and kube-scheduler with
mco-plugin registered (the Go module in scheduler/), and an image archive of each that containerd
imports (``ctr -n k8s.io images import``) or a registry takes (``crane push``, ``skopeo copy
docker-archive:...``), made without a Docker daemon.

    python scripts/build_schedulers.py            # `make schedulers`: build if needed, show where
    python scripts/build_schedulers.py --print    # NAME=PATH lines on stdout (binaries, archives)

Outputs are cached in ``$MCO_SCHEDULER_CACHE/<key>/`` (default ``~/.cache/mco/scheduler-bin/<key>/``),
where the key is the sha256 of what they are made from: scheduler/'s go.mod, go.sum and Go sources
(tests and test data aside), this script, scripts/gobuild.py, scripts/oci.py (the image archive
writer) and mco_py/__init__.py (the version in the image tags). ``images.json`` there names each
image, its archive and digest.

An image is one layer holding the program at ``/<name>``, run as user 65532 with the program as
entrypoint (the upstream Deployments pass only ``args``), for linux/amd64, tagged
``mco.many-core.io/<name>:<upstream version>-mco<MCO version>``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `scripts` and `mco_py` from the checkout

from scripts import gobuild, oci
from scripts.gobuild import BuildError

ROOT = Path(__file__).resolve().parents[1]
MODULE = ROOT / "scheduler"
REGISTRY = "mco.many-core.io"
#: Output name -> main package and the module whose version it carries.
PROGRAMS: dict[str, tuple[str, str]] = {
    "vc-scheduler": ("./cmd/vc-scheduler", "volcano.sh/volcano"),
    "kube-scheduler": ("./cmd/kube-scheduler", "k8s.io/kubernetes"),
}
USER = "65532:65532"


def mco_version() -> str:
    text = (ROOT / "mco_py" / "__init__.py").read_text()
    m = re.search(r'__version__\s*=\s*"([^"]+)"', text)
    if m is None:
        raise BuildError("mco_py/__init__.py has no __version__")
    return m[1]


def inputs() -> list[Path]:
    """What the outputs are made from."""
    sources = [p for p in MODULE.rglob("*.go") if not p.name.endswith("_test.go") and "testdata" not in p.parts]
    return [
        *sources,
        MODULE / "go.mod",
        MODULE / "go.sum",
        Path(__file__).resolve(),
        ROOT / "scripts" / "gobuild.py",
        ROOT / "scripts" / "oci.py",
        ROOT / "mco_py" / "__init__.py",
    ]


def cache_key() -> str:
    return gobuild.key_of(inputs(), ROOT)


def default_cache_root() -> Path:
    return gobuild.cache_root("MCO_SCHEDULER_CACHE", "scheduler-bin")


def _complete(out: Path) -> dict[str, Any] | None:
    try:
        images = json.loads((out / "images.json").read_text())
    except (OSError, ValueError):
        return None
    for name in PROGRAMS:
        binary, image = out / name, images.get(name, {})
        if not (binary.is_file() and os.access(binary, os.X_OK) and Path(image.get("archive", "")).is_file()):
            return None
    return {"dir": out, "binaries": {name: out / name for name in PROGRAMS}, "images": images}


def _build(out: Path) -> dict[str, Any]:
    go, goversion = gobuild.toolchain()
    mods = gobuild.modules(go, MODULE, {module for _, module in PROGRAMS.values()})
    version = mco_version()
    times: dict[str, float] = {}
    images: dict[str, Any] = {}
    for name, (pkg, module) in PROGRAMS.items():
        mod = mods[module]
        flags = gobuild.version_ldflags(mod, gobuild.origin_hash(go, mod))
        gobuild.log("schedulers", f"{name}: go build {pkg} ({module} {mod['Version']} + mco-plugin) ...")
        times[name] = gobuild.go_build(go, MODULE, pkg, out / name, flags, what=f"{name} ({pkg})")
        ref = f"{REGISTRY}/{name}:{mod['Version']}-mco{version}"
        archive = out / f"{name}.image.tar"
        images[name] = {"image": ref, "archive": str(archive), **write_image(out / name, archive, ref)}
        gobuild.log("schedulers", f"{name}: {times[name]} s; image {ref} in {archive}")
    (out / "images.json").write_text(json.dumps(images, indent=2) + "\n")
    return {"go": goversion, "seconds": times, "modules": {m: mods[m]["Version"] for m in sorted(mods)}}


def write_image(binary: Path, archive: Path, ref: str) -> dict[str, Any]:
    """Write ``archive``, the image of one scheduler: ``binary`` as ``/<name>`` (root-owned, mode
    0755) and its entrypoint, run as USER (scripts/oci.py writes it). Returns its digests."""
    config = oci.Config(entrypoint=(f"/{binary.name}",), user=USER, env=("PATH=/",))
    entries = [oci.File(f"/{binary.name}", binary, mode=0o755)]
    return oci.write_image(entries, config, archive, ref, created_by="scripts/build_schedulers.py")


def schedulers(*, cache_root: Path | None = None) -> dict[str, Any]:
    """``{"dir", "binaries": {name: Path}, "images": {name: {"image", "archive", "manifest", ...}}}``;
    builds them first unless the cache has them. Raises BuildError."""
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    return gobuild.cached(root / cache_key(), _complete, _build)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/build_schedulers.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--print", action="store_true", help="print NAME=PATH lines on stdout")
    parser.add_argument("--cache-root", type=Path, help="default: $MCO_SCHEDULER_CACHE or ~/.cache/mco/scheduler-bin")
    args = parser.parse_args(argv)
    start = time.monotonic()
    try:
        built = schedulers(cache_root=args.cache_root)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    gobuild.log("schedulers", f"ready in {built['dir']} ({time.monotonic() - start:.1f} s)")
    for image in built["images"].values():
        gobuild.log("schedulers", f"{image['image']}: {image['archive']}")
    if args.print:
        for name, path in built["binaries"].items():
            print(f"{name}={path}")
        for name, image in built["images"].items():
            print(f"{name}-image={image['image']}")
            print(f"{name}-archive={image['archive']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
