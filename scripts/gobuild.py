"""Building Go programs from pinned go.mod files, cached outside the clone: what the cluster test
binaries (tests/cluster/build.py) and MCO's schedulers (scripts/build_schedulers.py) share.

A set of outputs is built into ``<cache root>/<key>/``, where the key is the start of the sha256 of
the files the set is made from; a set counts only once its marker file (written last) exists, so
an interrupted build is redone, and a lock keeps two processes from building the same set. Go's own
module and build caches (GOMODCACHE, GOCACHE) are the defaults, so a rebuild after a small change
is fast. Needs Go on PATH and the Go module proxy of the machine's own Go settings.
"""

from __future__ import annotations

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
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

MARKER = ".complete.json"
#: Sets kept in a cache root: a build removes the least recently built beyond these (each set of
#: binaries is hundreds of MB; an edited tree makes a new one each time).
KEEP_SETS = 3
MIN_GO = (1, 24)
TAIL_LINES = 40
T = TypeVar("T")


class BuildError(RuntimeError):
    """Go is missing or too old, or a program failed to build."""


def log(prefix: str, msg: str) -> None:
    print(f"[{prefix}] {msg}", file=sys.stderr, flush=True)


def cache_root(env_var: str, name: str) -> Path:
    """``$<env_var>``, else ``$XDG_CACHE_HOME/mco/<name>`` (default ``~/.cache/mco/<name>``)."""
    env = os.environ.get(env_var)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "mco" / name


def key_of(files: Iterable[Path], root: Path) -> str:
    """The start of the sha256 of ``files`` (names relative to ``root``, and contents)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        data = path.read_bytes()
        digest.update(f"{path.relative_to(root)}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:20]


def env(*, cgo: bool = False) -> dict[str, str]:
    """The environment of every go command: the local toolchain, no workspace, read-only go.mod."""
    out = dict(os.environ)
    out.update(
        GOTOOLCHAIN="local",  # build with the Go that is here, never download one
        GOWORK="off",
        CGO_ENABLED="1" if cgo else "0",  # static binaries, as upstream releases them
        GOFLAGS="-mod=readonly -buildvcs=false",
    )
    return out


def toolchain() -> tuple[str, str]:
    """Path and version of the Go toolchain on PATH."""
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "`go` was not found on PATH: install Go 1.24 or newer "
            "(Debian: apt-get install golang-go, if new enough) to build the Go programs"
        )
    try:
        out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=True, env=env()).stdout
    except subprocess.CalledProcessError as exc:
        raise BuildError(f"`go env GOVERSION` failed: {exc.stderr.strip()}") from exc
    m = re.match(r"go(\d+)\.(\d+)", out.strip())
    if m is None or (int(m[1]), int(m[2])) < MIN_GO:
        raise BuildError(f"Go {MIN_GO[0]}.{MIN_GO[1]} or newer is needed (tool directives); found {out.strip()!r}")
    return go, out.strip()


def modules(go: str, cwd: Path, paths: set[str]) -> dict[str, dict[str, Any]]:
    """`go list -m -json` of ``paths`` in the module at ``cwd`` (a replaced module: its replacement)."""
    proc = subprocess.run(
        [go, "list", "-m", "-json", *sorted(paths)], check=False, cwd=cwd, capture_output=True, text=True, env=env()
    )
    if proc.returncode != 0:
        raise BuildError(f"`go list -m` failed in {cwd}:\n{tail(proc.stderr)}")
    mods: dict[str, dict[str, Any]] = {}
    decoder, text, pos = json.JSONDecoder(), proc.stdout, 0
    while text[pos:].strip():
        while text[pos].isspace():
            pos += 1
        info, pos = decoder.raw_decode(text, pos)
        mods[info["Path"]] = info.get("Replace") or info
    return mods


def origin_hash(go: str, mod: dict[str, Any]) -> str:
    """Upstream commit of a module version, when the module cache recorded it."""
    try:
        modcache = subprocess.run(
            [go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True, env=env()
        ).stdout.strip()
        escaped = re.sub(r"[A-Z]", lambda c: "!" + c[0].lower(), mod["Path"])
        info = Path(modcache, "cache", "download", escaped, "@v", mod["Version"] + ".info")
        return str(json.loads(info.read_text()).get("Origin", {}).get("Hash", ""))
    except (OSError, ValueError, subprocess.CalledProcessError):
        return ""


def version_ldflags(mod: dict[str, Any], commit: str) -> list[str]:
    """The ``-X`` flags upstream's release builds set for a program of module ``mod``, so it reports
    its version (/version, --version): Kubernetes' hack/lib/version.sh, Volcano's Makefile.def."""
    version, built = mod["Version"], mod.get("Time", "")
    flags: list[str] = []

    def x(var: str, value: str) -> None:
        flags.append(f"-X '{var}={value}'")

    if mod["Path"] == "k8s.io/kubernetes":
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
        x("volcano.sh/volcano/pkg/version.Version", version)
        x("volcano.sh/volcano/pkg/version.GitSHA", commit or "Not provided.")
        x("volcano.sh/volcano/pkg/version.Built", built)
    return flags


def tail(text: str, n: int = TAIL_LINES) -> str:
    lines = text.rstrip().splitlines()
    return "\n".join(("    " + line) for line in lines[-n:])


def go_build(go: str, cwd: Path, pkg: str, out: Path, ldflags: list[str], *, what: str) -> float:
    """``go build -trimpath`` of ``pkg`` into ``out`` (written whole or not at all); its seconds."""
    tmp = out.with_name(f".{out.name}.partial")
    flags = " ".join(["-s", "-w", *ldflags])  # no symbol table / DWARF, as upstream release builds
    start = time.monotonic()
    proc = subprocess.run(
        [go, "build", "-trimpath", f"-ldflags={flags}", "-o", str(tmp), pkg],
        check=False,
        cwd=cwd,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seconds = round(time.monotonic() - start, 1)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise BuildError(f"building {what} failed with exit code {proc.returncode} after {seconds} s; last lines:\n"
                         f"{tail(proc.stdout)}")  # fmt: skip
    os.replace(tmp, out)
    return seconds


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cached(out: Path, complete: Callable[[Path], T | None], build: Callable[[Path], dict[str, Any]]) -> T:
    """The set in ``out``: found when its marker is there and ``complete`` accepts it, else built by
    ``build`` (which returns the marker's content) under a lock, and the marker written last."""
    found = complete(out) if (out / MARKER).is_file() else None
    if found is not None:
        return found
    with locked(out.parent / f"{out.name}.lock"):
        found = complete(out) if (out / MARKER).is_file() else None  # another process may have built it
        if found is not None:
            return found
        (out / MARKER).unlink(missing_ok=True)
        out.mkdir(parents=True, exist_ok=True)
        marker = build(out)
        marker["built_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        tmp = out / f"{MARKER}.partial"
        tmp.write_text(json.dumps(marker, indent=2) + "\n")
        os.replace(tmp, out / MARKER)  # last: the set is complete
        prune(out.parent, keep=out)
        done = complete(out)
        if done is None:
            raise BuildError(f"{out}: the build finished but its outputs are not all there")
        return done


def prune(root: Path, *, keep: Path, sets: int = KEEP_SETS) -> None:
    """Remove the complete sets in ``root`` built least recently, beyond ``sets`` (never ``keep``;
    a set being built has no marker yet and is left alone)."""
    built = sorted(
        (d for d in root.iterdir() if d != keep and (d / MARKER).is_file()),
        key=lambda d: (d / MARKER).stat().st_mtime,
        reverse=True,
    )
    for old in built[max(0, sets - 1) :]:
        with locked(root / f"{old.name}.lock"):
            shutil.rmtree(old, ignore_errors=True)
        (root / f"{old.name}.lock").unlink(missing_ok=True)
