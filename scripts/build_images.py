"""Build the container images test nodes run (kubelet + containerd, no registry reachable) as
archives that ``ctr -n k8s.io images import FILE`` takes (docs/images.md):

    python scripts/build_images.py            # build if needed, show where
    python scripts/build_images.py --print    # NAME-image=REF and NAME-archive=PATH lines on stdout

- pause: the kubelet's sandbox image, Kubernetes' own pause.c (build/pause/linux in the
  k8s.io/kubernetes module of the kubelet's version) compiled static, tagged with the TAG of that
  release's build/pause/Makefile;
- redis (an online service), stress-ng (an offline job) and memcached: Debian's programs with
  exactly the shared libraries they need (DT_NEEDED, read by scripts/elf.py, and the loader), a
  minimal /etc/passwd and /etc/group, run as a non-root uid, tagged with the Debian version.

A Debian package's files are the host's when it is installed (dpkg says where), else those of
``apt-get download PACKAGE=VERSION`` unpacked with ``dpkg -x`` into a scratch directory (nothing is
installed). The archives are cached in ``${MCO_CACHE:-~/.cache/mco}/images/<key>/``, where the key
is the sha256 of this script, scripts/oci.py and scripts/elf.py and the versions of the Debian
packages the images are made from (each program's package and its dependencies, installed or to
be downloaded; gcc and libc6-dev for pause). A set is built in a scratch directory and renamed
into place whole, under a lock (testbed/cache.py: a second builder waits, then takes the first
one's set). ``images.json`` there names each image's ref, archive, digests and the package
versions in it.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `scripts` from the checkout

from scripts import elf, gobuild, oci
from scripts.gobuild import BuildError
from testbed import cache

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = "mco.many-core.io/test"
#: The kubelet's Kubernetes (tests/cluster/go.mod): its release's pause program is the sandbox.
KUBERNETES = "v1.34.1"
PAUSE_DIR = "build/pause"
PAUSE_USER = "65535:65535"  # as upstream's pause image (build/pause/Dockerfile)
NONROOT = 65532
#: glibc's search path on Debian amd64 (``ld.so --help``): the images have no ld.so.cache.
LIB_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib")
#: What pause is compiled with: the versions of these (and their dependencies) are in the key.
PAUSE_TOOLCHAIN = ("gcc", "libc6-dev")
CREATED_BY = "scripts/build_images.py"
KEEP_SETS = 3  # sets kept in the cache root (each about 20 MiB)
IMAGE_TMP = "/tmp"  # noqa: S108 - a directory in the images (mode 1777), not a file on this host


@dataclass(frozen=True)
class Program:
    """An image of Debian programs: ``files`` (package, absolute path) with their libraries."""

    name: str
    files: tuple[tuple[str, str], ...]
    config: oci.Config
    user: str
    """The account name in /etc/passwd for uid NONROOT."""
    writable: tuple[str, ...] = ()
    """Directories owned by the image's user."""

    @property
    def packages(self) -> list[str]:
        return sorted({package for package, _ in self.files})


def _nonroot(
    *, entrypoint: str, cmd: tuple[str, ...], working_dir: str = "", ports: tuple[str, ...] = ()
) -> oci.Config:
    return oci.Config(
        entrypoint=(entrypoint,),
        cmd=cmd,
        user=f"{NONROOT}:{NONROOT}",
        env=("PATH=/usr/bin",),
        working_dir=working_dir,
        exposed_ports=ports,
    )


PROGRAMS = (
    Program(
        "redis",
        # redis-server is a link to redis-check-rdb (the program chooses its part by argv[0])
        (("redis-server", "/usr/bin/redis-server"), ("redis-tools", "/usr/bin/redis-cli")),
        # a pod's own network namespace, no persistence: a cache the tests fill and drop
        _nonroot(
            entrypoint="/usr/bin/redis-server",
            cmd=("--protected-mode", "no", "--save", "", "--appendonly", "no", "--port", "6379"),
            working_dir="/data",
            ports=("6379/tcp",),
        ),
        user="redis",
        writable=("/data",),
    ),
    Program(
        "stress-ng",
        (("stress-ng", "/usr/bin/stress-ng"),),
        # stress-ng makes its scratch files in the current directory
        _nonroot(entrypoint="/usr/bin/stress-ng", cmd=("--cpu", "1", "--timeout", "60s"), working_dir=IMAGE_TMP),
        user="stress",
    ),
    Program(
        "memcached",
        (("memcached", "/usr/bin/memcached"),),
        _nonroot(
            entrypoint="/usr/bin/memcached",
            cmd=("--port=11211", "--memory-limit=64"),
            ports=("11211/tcp",),
        ),
        user="memcache",
    ),
)
NAMES = ("pause", *(p.name for p in PROGRAMS))


def log(msg: str) -> None:
    gobuild.log("images", msg)


def _run(argv: list[str], *, cwd: Path | None = None, what: str) -> str:
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise BuildError(f"{what}: {argv[0]} is not installed") from exc
    if proc.returncode != 0:
        raise BuildError(f"{what}: `{' '.join(argv)}` failed ({proc.returncode}):\n{gobuild.tail(proc.stderr)}")
    return proc.stdout


# --- Debian packages ---------------------------------------------------------------------------


def closure(packages: Iterable[str]) -> list[str]:
    """``packages`` and everything they depend on (Depends, Pre-Depends; every alternative), as apt
    sees them."""
    out = _run(
        ["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
         "--no-breaks", "--no-replaces", "--no-enhances", *packages],
        what="listing the packages' dependencies",
    )  # fmt: skip
    return sorted({line.strip() for line in out.splitlines() if line and not line[0].isspace() and "<" not in line})


def versions(packages: Iterable[str]) -> dict[str, tuple[str, bool]]:
    """Each package's version and whether it is installed: the installed version, else the one
    ``apt-get download`` fetches (apt's candidate)."""
    names = sorted(set(packages))
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Status}\n", *names],
        capture_output=True,
        text=True,
        check=False,  # 1 when some are unknown to dpkg: apt is asked about those
    )
    found: dict[str, tuple[str, bool]] = {}
    for line in proc.stdout.splitlines():
        name, version, status = line.split("\t")
        if status == "installed":
            found[name] = (version, True)
    rest = [n for n in names if n not in found]
    if rest:
        policy, name = _run(["apt-cache", "policy", *rest], what="asking apt for candidates"), ""
        for line in policy.splitlines():
            if line and not line[0].isspace():
                name = line.rstrip(":")
            elif line.strip().startswith("Candidate:"):
                candidate = line.split(":", 1)[1].strip()
                if candidate != "(none)":
                    found[name] = (candidate, False)
    missing = [n for n in names if n not in found]
    if missing:
        raise BuildError(f"apt knows no version of {missing}: run `apt-get update` (as root), or check the apt sources")
    return found


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    root: Path
    """``/`` for a package installed on the host, else where its .deb is unpacked."""
    deb: Path | None = None
    """The downloaded .deb (None: installed)."""

    @property
    def installed(self) -> bool:
        return self.root == Path("/")


@dataclass
class Debian:
    """Packages' files, from the host or from downloaded .debs unpacked under ``work``."""

    work: Path
    known: dict[str, tuple[str, bool]]
    fetched: dict[str, Package] = field(default_factory=dict)

    def get(self, name: str) -> Package:
        if name in self.fetched:
            return self.fetched[name]
        if name not in self.known:
            self.known.update(versions([name]))
        version, installed = self.known[name]
        if installed:
            package = Package(name, version, Path("/"))
        else:
            debs = self.work / "debs"
            debs.mkdir(parents=True, exist_ok=True)
            before = set(debs.glob("*.deb"))
            _run(["apt-get", "download", "-q", f"{name}={version}"], cwd=debs, what=f"downloading {name} {version}")
            (deb,) = set(debs.glob("*.deb")) - before
            root = self.work / "pkgs" / name
            root.parent.mkdir(exist_ok=True)
            _run(["dpkg-deb", "-x", str(deb), str(root)], what=f"unpacking {deb.name}")
            package = Package(name, version, root, deb)
            log(f"{name} {version}: not installed here, downloaded")
        self.fetched[name] = package
        return package

    def depends(self, package: Package) -> list[list[str]]:
        """The Depends and Pre-Depends of a downloaded package: groups of alternatives."""
        if package.deb is None:
            return []
        deb = package.deb
        control = _run(["dpkg-deb", "--field", str(deb)], what=f"reading {deb.name}")
        fields = dict(re.findall(r"^([\w-]+):(.*(?:\n .*)*)", control, re.MULTILINE))
        text = ",".join(fields.get(name, "") for name in ("Pre-Depends", "Depends"))
        groups = []
        for group in text.split(","):
            alternatives = [re.sub(r"\(.*?\)|:\w+", "", alt).strip() for alt in group.split("|")]
            if any(alternatives):
                groups.append([a for a in alternatives if a])
        return groups

    def fetch_more(self) -> bool:
        """Fetch what the downloaded packages depend on and the host lacks; False when nothing was
        missing (a library that is still not found is in no package they depend on)."""
        added = False
        for package in list(self.fetched.values()):
            if package.installed:
                continue
            for group in self.depends(package):
                if any(a in self.fetched or self.known.get(a, ("", False))[1] for a in group):
                    continue
                if group[0] not in self.known:
                    self.known.update(versions([group[0]]))
                if not self.known[group[0]][1]:
                    self.get(group[0])
                    added = True
        return added


def _other_usr(path: str) -> str:
    """The same file's other name on a merged-/usr host (/lib/x -> /usr/lib/x and back)."""
    return path[4:] if path.startswith("/usr/") else "/usr" + path


def host_owners(paths: Iterable[str]) -> dict[str, tuple[str, str]]:
    """Host path -> (package, the path the package ships it under): dpkg records one of the two
    names a merged /usr gives a file."""
    wanted = sorted(set(paths))
    if not wanted:
        return {}
    proc = subprocess.run(
        ["dpkg-query", "-S", *wanted, *(_other_usr(p) for p in wanted)], capture_output=True, text=True, check=False
    )
    owner: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^([^:,\s]+)(?::[\w-]+)?: (/.*)$", line)
        if m:
            owner[m[2]] = m[1]
    out: dict[str, tuple[str, str]] = {}
    for path in wanted:
        for name in (path, _other_usr(path)):
            if name in owner:
                out[path] = (owner[name], name)
                break
        else:
            raise BuildError(f"{path} on this host belongs to no Debian package (dpkg -S): not put in an image")
    return out


# --- one image's file tree -----------------------------------------------------------------------


@dataclass
class Tree:
    """The files of an image: each (package, path) with the link targets and libraries it needs."""

    debian: Debian
    packages: list[Package]
    found: dict[str, Package] = field(default_factory=dict)
    """Image path -> the package root it was found in (host paths as looked up)."""

    def _roots(self, prefer: Package | None) -> list[Package]:
        first = [prefer] if prefer is not None else []
        downloaded = [p for p in self.debian.fetched.values() if not p.installed]
        host = [Package("(host)", "", Path("/"))]
        return list(dict.fromkeys([*first, *self.packages, *downloaded, *host]))

    def _locate(self, path: str, prefer: Package | None) -> Package | None:
        return next((p for p in self._roots(prefer) if os.path.lexists(p.root / path.lstrip("/"))), None)

    def add(self, path: str, prefer: Package | None = None) -> None:
        """``path`` (found in ``prefer`` first), what its link points to, and its libraries."""
        if path in self.found:
            return
        package = self._locate(path, prefer)
        if package is None:
            raise BuildError(f"{path} is in none of {[p.name for p in self._roots(prefer)]}")
        self.found[path] = package
        source = package.root / path.lstrip("/")
        if source.is_symlink():
            target = os.readlink(source)
            self.add(posixpath.normpath(posixpath.join(posixpath.dirname(path), target)), package)
            return
        if not source.is_file():
            raise BuildError(f"{source}: not a regular file")
        if not elf.is_elf(source):
            return
        dynamic = elf.read(source)
        if dynamic.interpreter:
            self.add(dynamic.interpreter, package)
        origin = posixpath.dirname(path)
        dirs = [d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin) for d in dynamic.runpath]
        for name in dynamic.needed:
            self.add(self._library(name, [*dirs, *LIB_DIRS], path), package)

    def _library(self, name: str, dirs: list[str], needed_by: str) -> str:
        while True:
            for directory in dirs:
                candidate = posixpath.join(directory, name)
                if self._locate(candidate, None) is not None:
                    return candidate
            if not self.debian.fetch_more():
                raise BuildError(f"{needed_by} needs {name}: in none of {dirs} on this host or in the packages")

    def entries(self) -> tuple[list[oci.Entry], dict[str, str]]:
        """The image's entries under the paths their packages ship them at, and the package
        versions they come from."""
        on_host = host_owners(p for p, pkg in self.found.items() if pkg.installed)
        renamed = {p: on_host[p][1] if p in on_host else p for p in self.found}
        entries: list[oci.Entry] = []
        used: dict[str, str] = {}
        for path, package in self.found.items():
            source = package.root / path.lstrip("/")
            owner = self.debian.get(on_host[path][0]) if path in on_host else package
            used[owner.name] = owner.version
            if source.is_symlink():
                target = os.readlink(source)
                moved = renamed[posixpath.normpath(posixpath.join(posixpath.dirname(path), target))]
                if not target.startswith("/"):  # relative as written, from where the link now is
                    moved = posixpath.relpath(moved, posixpath.dirname(renamed[path]))
                entries.append(oci.Symlink(renamed[path], moved))
            else:
                entries.append(oci.File(renamed[path], source, mode=source.stat().st_mode & 0o7777))
        return entries, dict(sorted(used.items()))


def _accounts(user: str) -> list[oci.Entry]:
    passwd = (
        f"root:x:0:0:root:/root:/usr/sbin/nologin\n{user}:x:{NONROOT}:{NONROOT}:{user}:/nonexistent:/usr/sbin/nologin\n"
    )
    group = f"root:x:0:\n{user}:x:{NONROOT}:\n"
    return [oci.File("/etc/passwd", passwd.encode()), oci.File("/etc/group", group.encode())]


def tag_of(debian_version: str) -> str:
    """An image tag from a Debian version: no epoch, characters a tag cannot hold made ``-``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", debian_version.split(":", 1)[-1])


def program_image(program: Program, debian: Debian, out: Path) -> dict[str, Any]:
    tree = Tree(debian, [debian.get(name) for name in program.packages])
    for package, path in program.files:
        tree.add(path, debian.get(package))
    entries, used = tree.entries()
    entries += _accounts(program.user)
    entries.append(oci.Dir(IMAGE_TMP, mode=0o1777))
    entries += [oci.Dir(d, mode=0o755, uid=NONROOT, gid=NONROOT) for d in program.writable]
    _check_links(entries)
    main_package = program.files[0][0]
    ref = f"{REGISTRY}/{program.name}:{tag_of(debian.get(main_package).version)}"
    archive = out / f"{program.name}.image.tar"
    digests = oci.write_image(entries, program.config, archive, ref, created_by=CREATED_BY)
    return {"image": ref, "archive": str(archive), **digests, "packages": used}


def _check_links(entries: list[oci.Entry]) -> None:
    """Every link resolves to an entry of the image (a dangling one would fail only at run time)."""
    paths = {e.path for e in entries}
    for link in (e for e in entries if isinstance(e, oci.Symlink)):
        target = posixpath.normpath(posixpath.join(posixpath.dirname(link.path), link.target))
        if target not in paths:
            raise BuildError(f"{link.path} -> {link.target}: the target is not in the image")


# --- pause -----------------------------------------------------------------------------------------


def pause_source(work: Path) -> Path:
    """build/pause of the k8s.io/kubernetes module at KUBERNETES (the Go module cache, or the proxy)."""
    go, _ = gobuild.toolchain()
    out = _run(
        [go, "mod", "download", "-json", f"k8s.io/kubernetes@{KUBERNETES}"],
        cwd=work,
        what=f"fetching k8s.io/kubernetes {KUBERNETES} (the pause program's source)",
    )
    pause = Path(json.loads(out)["Dir"]) / PAUSE_DIR
    if not (pause / "linux" / "pause.c").is_file() or not (pause / "Makefile").is_file():
        raise BuildError(f"k8s.io/kubernetes {KUBERNETES} has no {PAUSE_DIR}/linux/pause.c and Makefile")
    return pause


def pause_image(debian: Debian, work: Path, out: Path) -> dict[str, Any]:
    pause = pause_source(work)
    m = re.search(r"^TAG \?= (\S+)$", (pause / "Makefile").read_text(), re.MULTILINE)
    if m is None:
        raise BuildError(f"{pause / 'Makefile'}: no `TAG ?=` line (the pause image's version)")
    tag = m[1]
    tools = {name: debian.get(name) for name in PAUSE_TOOLCHAIN}
    if not all(p.installed for p in tools.values()):
        raise BuildError(f"compiling pause needs {' and '.join(PAUSE_TOOLCHAIN)} installed (make setup, as root)")
    build = work / "pause"
    build.mkdir()
    shutil.copy(pause / "linux" / "pause.c", build / "pause.c")
    # upstream's flags (build/pause/Makefile); relative names keep the scratch path out of the binary
    _run(["gcc", "-Os", "-Wall", "-Werror", "-static", f"-DVERSION=v{tag}-{KUBERNETES}", "-o", "pause", "pause.c"],
         cwd=build, what="compiling pause.c")  # fmt: skip
    _run(["strip", "pause"], cwd=build, what="stripping pause")
    ref = f"{REGISTRY}/pause:{tag}"
    archive = out / "pause.image.tar"
    config = oci.Config(entrypoint=("/pause",), user=PAUSE_USER)
    digests = oci.write_image(
        [oci.File("/pause", build / "pause", mode=0o755)], config, archive, ref, created_by=CREATED_BY
    )
    return {
        "image": ref,
        "archive": str(archive),
        **digests,
        "source": f"k8s.io/kubernetes@{KUBERNETES}/{PAUSE_DIR}/linux/pause.c",
        "packages": {name: p.version for name, p in sorted(tools.items())},
    }


# --- the cached set ------------------------------------------------------------------------------


def inputs() -> list[Path]:
    """The files that decide the images' bytes (the Debian packages are keyed by version)."""
    return [Path(__file__).resolve(), ROOT / "scripts" / "oci.py", ROOT / "scripts" / "elf.py"]


def debian_inputs() -> list[str]:
    """The packages whose versions the key holds (before dependencies)."""
    return sorted({*PAUSE_TOOLCHAIN, *(name for p in PROGRAMS for name in p.packages)})


def cache_key(known: dict[str, tuple[str, bool]]) -> str:
    facts = json.dumps({name: version for name, (version, _) in sorted(known.items())}).encode()
    return hashlib.sha256(gobuild.key_of(inputs(), ROOT).encode() + b"\0" + facts).hexdigest()[:20]


def default_cache_root() -> Path:
    return cache.base() / "images"


def _complete(out: Path) -> dict[str, Any] | None:
    try:
        images = json.loads((out / "images.json").read_text())
    except (OSError, ValueError):
        return None
    if sorted(images) != sorted(NAMES) or not all(Path(i.get("archive", "")).is_file() for i in images.values()):
        return None
    return {"dir": out, "images": images}


def _build(final: Path, known: dict[str, tuple[str, bool]], scratch: Path) -> None:
    """Fill ``scratch`` (renamed to ``final`` when this returns) with the archives and images.json,
    which names them at ``final``. Downloads are unpacked in ``scratch/.work``, removed at the end."""
    work = scratch / ".work"
    work.mkdir()
    debian = Debian(work, dict(known))
    steps: dict[str, Callable[[], dict[str, Any]]] = {"pause": functools.partial(pause_image, debian, work, scratch)}
    for program in PROGRAMS:
        steps[program.name] = functools.partial(program_image, program, debian, scratch)
    images: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    for name, step in steps.items():
        start = time.monotonic()
        images[name] = step()
        seconds[name] = round(time.monotonic() - start, 1)
        archive = Path(images[name]["archive"])
        images[name]["archive"] = str(final / archive.name)
        log(f"{images[name]['image']}: {archive.stat().st_size / 2**20:.1f} MiB in {seconds[name]} s")
    shutil.rmtree(work)
    (scratch / "images.json").write_text(json.dumps(images, indent=2) + "\n")
    built = {"seconds": seconds, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (scratch / "build.json").write_text(json.dumps(built, indent=2) + "\n")


def images(*, cache_root: Path | None = None) -> dict[str, Any]:
    """``{"dir": Path, "images": {name: {"image", "archive", "manifest", "config", "layerDiffID",
    "packages", ...}}}``; builds the set first unless the cache has it. Raises BuildError."""
    root = Path(cache_root) if cache_root is not None else default_cache_root()
    known = versions(closure(debian_inputs()))
    final = root / cache_key(known)
    found = _complete(final)
    if found is not None:
        return found
    # a set someone took files from is built again; a builder that holds the lock makes others wait
    cache.build_once(final, functools.partial(_build, final, known), rebuild=final.exists())
    cache.prune(root, keep=KEEP_SETS)
    done = _complete(final)
    if done is None:
        raise BuildError(f"{final}: the build finished but its outputs are not all there")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/build_images.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--print", action="store_true", help="print NAME-image=REF and NAME-archive=PATH lines")
    parser.add_argument("--cache-root", type=Path, help="default: ${MCO_CACHE:-~/.cache/mco}/images")
    args = parser.parse_args(argv)
    start = time.monotonic()
    try:
        built = images(cache_root=args.cache_root)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    log(f"ready in {built['dir']} ({time.monotonic() - start:.1f} s)")
    for image in built["images"].values():
        log(f"{image['image']}: {image['archive']}")
    if args.print:
        for name, image in built["images"].items():
            print(f"{name}-image={image['image']}")
            print(f"{name}-archive={image['archive']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
