"""Build the real control-plane binaries (etcd, Kubernetes, Volcano) from Go modules.

Also copies Volcano's CRDs (``crds/`` beside the binaries, see :func:`volcano_crds`).

The programs and their versions are the ``tool`` directives of ``go.mod`` beside
this file; ``go.mod``'s header says why it replaces what it does.

Built binaries are cached in ``$MCO_CLUSTER_CACHE/<key>/`` (default
``~/.cache/mco/cluster-bin/<key>/``), where ``<key>`` is the start of the sha256 of
go.mod, go.sum and this file: a change to any of them builds a new set, an
unchanged set is reused without running ``go``. A directory counts only once its
marker file (written last) exists, so an interrupted build is redone. Go's own
module cache and build cache (GOMODCACHE, GOCACHE) are the defaults, so a rebuild
after a small change is fast.

    python -m tests.cluster.build            # build if needed, show where
    python -m tests.cluster.build --print    # also print NAME=PATH lines (and crds=DIR) on stdout

From Python::

    from tests.cluster.build import binaries
    paths = binaries()          # {"etcd": Path(...), "kube-apiserver": Path(...), ...}

Needs Go 1.24 or newer on PATH (``tool`` directives) and the Go module proxy.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MARKER = ".complete.json"
CRDS = "crds"  # Volcano's CRDs (config/crd/volcano/bases of the Volcano module), beside the binaries
CRD_SOURCE = "config/crd/volcano/bases"

# Output name -> main package (each is a `tool` in go.mod) and the module that
# carries its version.
TOOLS: dict[str, tuple[str, str]] = {
    "etcd": ("go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/server/v3"),
    "kube-apiserver": ("k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes"),
    "kube-scheduler": ("k8s.io/kubernetes/cmd/kube-scheduler", "k8s.io/kubernetes"),
    "kube-controller-manager": ("k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes"),
    "kubectl": ("k8s.io/kubernetes/cmd/kubectl", "k8s.io/kubernetes"),
    "vc-scheduler": ("volcano.sh/volcano/cmd/scheduler", "volcano.sh/volcano"),
    "vc-controller-manager": ("volcano.sh/volcano/cmd/controller-manager", "volcano.sh/volcano"),
}

MIN_GO = (1, 24)
TAIL_LINES = 40


class BuildError(RuntimeError):
    """Go is missing or too old, or a binary failed to build."""


def cache_key() -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "build.py"):
        data = (HERE / name).read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:20]


def default_cache_root() -> Path:
    env = os.environ.get("MCO_CLUSTER_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "mco" / "cluster-bin"


def _complete(out: Path) -> dict[str, Path] | None:
    if not (out / MARKER).is_file():
        return None
    paths = {name: out / name for name in TOOLS}
    if not all(p.is_file() and os.access(p, os.X_OK) for p in paths.values()):
        return None
    if not any((out / CRDS).glob("*.yaml")):
        return None
    return paths


def _log(msg: str) -> None:
    print(f"[cluster-build] {msg}", file=sys.stderr, flush=True)


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GOTOOLCHAIN="local",  # build with the Go that is here, never download one
        GOWORK="off",
        CGO_ENABLED="0",  # static binaries, as upstream releases them; no C compiler needed
        GOFLAGS="-mod=readonly -buildvcs=false",
    )
    return env


def _go() -> tuple[str, str]:
    """Path and version of the Go toolchain on PATH."""
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "`go` was not found on PATH: install Go 1.24 or newer "
            "(Debian: apt-get install golang-go, if new enough) to build the cluster binaries"
        )
    try:
        out = subprocess.run(
            [go, "env", "GOVERSION"], capture_output=True, text=True, check=True, env=_go_env()
        ).stdout.strip()
    except subprocess.CalledProcessError as exc:
        raise BuildError(f"`go env GOVERSION` failed: {exc.stderr.strip()}") from exc
    m = re.match(r"go(\d+)\.(\d+)", out)
    if m is None or (int(m[1]), int(m[2])) < MIN_GO:
        raise BuildError(f"Go {MIN_GO[0]}.{MIN_GO[1]} or newer is needed (tool directives); found {out!r}")
    return go, out


def _modules(go: str, paths: set[str]) -> dict[str, dict[str, Any]]:
    """`go list -m -json` of the modules whose versions go into the ldflags."""
    proc = subprocess.run(
        [go, "list", "-m", "-json", *sorted(paths)],
        check=False,
        cwd=HERE,
        capture_output=True,
        text=True,
        env=_go_env(),
    )
    if proc.returncode != 0:
        raise BuildError(f"`go list -m` failed in {HERE}:\n{_tail(proc.stderr)}")
    mods: dict[str, dict[str, Any]] = {}
    decoder, text, pos = json.JSONDecoder(), proc.stdout, 0
    while text[pos:].strip():
        while text[pos].isspace():
            pos += 1
        info, pos = decoder.raw_decode(text, pos)
        mods[info["Path"]] = info.get("Replace") or info
    return mods


def _origin_hash(go: str, mod: dict[str, Any]) -> str:
    """Upstream commit of a module version, when the module cache recorded it."""
    try:
        modcache = subprocess.run(
            [go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True, env=_go_env()
        ).stdout.strip()
        escaped = re.sub(r"[A-Z]", lambda c: "!" + c[0].lower(), mod["Path"])
        info = Path(modcache, "cache", "download", escaped, "@v", mod["Version"] + ".info")
        return str(json.loads(info.read_text()).get("Origin", {}).get("Hash", ""))
    except (OSError, ValueError, subprocess.CalledProcessError):
        return ""


def _ldflags(name: str, mod: dict[str, Any], commit: str) -> str:
    version, built = mod["Version"], mod.get("Time", "")
    flags = ["-s", "-w"]  # no symbol table / DWARF, as upstream release builds

    def x(var: str, value: str) -> None:
        flags.append(f"-X '{var}={value}'")

    if mod["Path"] == "k8s.io/kubernetes":
        # What hack/lib/version.sh sets: /version, --version, kubectl version.
        m = re.match(r"v(\d+)\.(\d+)\.", version)
        if m is None:
            raise BuildError(f"cannot read major.minor from k8s.io/kubernetes version {version!r}")
        major, minor = m.groups()
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
            x(f"{pkg}.gitVersion", version)
            x(f"{pkg}.gitMajor", major)
            x(f"{pkg}.gitMinor", minor)
            x(f"{pkg}.gitCommit", commit)
            x(f"{pkg}.gitTreeState", "clean")
            x(f"{pkg}.buildDate", built)
    elif mod["Path"] == "volcano.sh/volcano":
        # What Volcano's Makefile.def sets (--version prints them).
        x("volcano.sh/volcano/pkg/version.Version", version)
        x("volcano.sh/volcano/pkg/version.GitSHA", commit or "Not provided.")
        x("volcano.sh/volcano/pkg/version.Built", built)
    elif name == "etcd" and commit:
        # etcd's version number is a constant in go.etcd.io/etcd/api/v3/version.
        x("go.etcd.io/etcd/api/v3/version.GitSHA", commit[:7])
    return " ".join(flags)


def _tail(text: str, n: int = TAIL_LINES) -> str:
    lines = text.rstrip().splitlines()
    return "\n".join(("    " + line) for line in lines[-n:])


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build(out: Path) -> dict[str, Path]:
    go, goversion = _go()
    mods = _modules(go, {module for _, module in TOOLS.values()})
    (out / MARKER).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    _log(f"building {len(TOOLS)} binaries with {goversion} into {out}")
    times: dict[str, float] = {}
    start_all = time.monotonic()
    for name, (pkg, module) in TOOLS.items():
        mod = mods[module]
        ldflags = _ldflags(name, mod, _origin_hash(go, mod))
        tmp = out / f".{name}.partial"
        cmd = [go, "build", "-trimpath", f"-ldflags={ldflags}", "-o", str(tmp), pkg]
        _log(f"{name}: go build {pkg} ({module} {mod['Version']}) ...")
        start = time.monotonic()
        proc = subprocess.run(
            cmd, check=False, cwd=HERE, env=_go_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        times[name] = round(time.monotonic() - start, 1)
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise BuildError(
                f"building {name} ({pkg} from {module} {mod['Version']}) failed "
                f"with exit code {proc.returncode} after {times[name]} s; last lines:\n"
                f"{_tail(proc.stdout)}"
            )
        os.replace(tmp, out / name)
        size = (out / name).stat().st_size / 2**20
        _log(f"{name}: done in {times[name]} s ({size:.1f} MiB)")
    total = round(time.monotonic() - start_all, 1)
    crds = _copy_crds(go, out)
    marker = {
        "go": goversion,
        "seconds": times,
        "total_seconds": total,
        "modules": {m: mods[m]["Version"] for m in sorted(mods)},
        "crds": crds,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    tmp_marker = out / f"{MARKER}.partial"
    tmp_marker.write_text(json.dumps(marker, indent=2) + "\n")
    os.replace(tmp_marker, out / MARKER)  # last: the set is complete
    _log(f"all {len(TOOLS)} built in {total} s")
    return {name: out / name for name in TOOLS}


def _copy_crds(go: str, out: Path) -> list[str]:
    """Copy Volcano's CRDs from the module cache to ``out/crds`` (the module was
    downloaded by the build); returns the file names."""
    src = Path(_modules(go, {"volcano.sh/volcano"})["volcano.sh/volcano"].get("Dir", ""), CRD_SOURCE)
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


def binaries(*, cache_root: Path | None = None) -> dict[str, Path]:
    """Paths of etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, vc-scheduler and
    vc-controller-manager; builds them first unless the cache has the set already.

    Raises BuildError when Go is missing or a build fails.
    """
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    out = root / cache_key()
    found = _complete(out)
    if found is not None:
        return found
    with _locked(root / f"{out.name}.lock"):
        found = _complete(out)  # another process may have built it meanwhile
        if found is not None:
            return found
        return _build(out)


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
