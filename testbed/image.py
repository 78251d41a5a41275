"""The base image every booted node runs: Debian bookworm (debootstrap minbase) with the
packages of ``testbed/packages.txt`` baked in.

The image lives outside the clone, in ``${MCO_CACHE:-~/.cache/mco}/testbed/image-<hash>``,
where ``<hash>`` covers everything that decides its content (the package list and this
file). It is built into a temporary directory and renamed into place only when complete,
under a lock, so an interrupted build is never reused and concurrent builders wait for
one another instead of building twice.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from testbed import cache, system
from testbed.errors import TestbedError

log = logging.getLogger(__name__)

SUITE = "bookworm"
PACKAGES_FILE = Path(__file__).with_name("packages.txt")
#: Bumped by hand when the build steps change in a way the source hash would not show.
IMAGE_FORMAT = "1"
#: Timers that would run apt or disk maintenance inside a short-lived test node.
DISABLED_TIMERS = ("apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_all.timer", "fstrim.timer")
RESOLV_CONF = "# mco test-bed node: no nameserver on purpose (nodes have no route to a resolver)\n"
SSHD_DROPIN = "# mco test-bed node\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n"
BUILD_TIMEOUT_SECONDS = 900


def cache_root() -> Path:
    """``${MCO_CACHE:-~/.cache/mco}/testbed``: project-owned, outside the clone."""
    base = os.environ.get("MCO_CACHE") or str(Path.home() / ".cache" / "mco")
    return Path(base) / "testbed"


def read_packages(path: Path = PACKAGES_FILE) -> list[str]:
    """Package names from the list file; a bad line is an error naming the line."""
    names = []
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", line):
            raise TestbedError(f"{path}:{number}: {line!r} is not a Debian package name (one name per line)")
        names.append(line)
    if not names:
        raise TestbedError(f"{path} lists no packages")
    return names


def image_hash(packages_file: Path = PACKAGES_FILE) -> str:
    """Hash of the image inputs: the package list, this build script and the format number."""
    digest = hashlib.sha256()
    digest.update(f"{SUITE}\0{IMAGE_FORMAT}\0".encode())
    digest.update(" ".join(sorted(read_packages(packages_file))).encode())
    digest.update(Path(__file__).read_bytes())
    return digest.hexdigest()[:16]


def image_path(root: Path | None = None, packages_file: Path = PACKAGES_FILE) -> Path:
    """Where the image for the current inputs lives (it may not be built yet)."""
    return (root or cache_root()) / f"image-{image_hash(packages_file)}"


#: Where apt keeps the Release files of the sources it fetched (apt's Dir::State::lists).
APT_LISTS = Path("/var/lib/apt/lists")
#: What apt escapes in a source's URI to name its files in APT_LISTS (apt's URItoFileName).
_APT_QUOTED = set('\\|{}[]<>"^~_=!@#$%&*')


@dataclass(frozen=True, slots=True)
class AptSource:
    """One ``deb`` source of the host's apt configuration: a URI, a suite and its components."""

    uri: str
    suite: str
    components: tuple[str, ...]


def apt_sources(sources_dir: Path) -> list[AptSource]:
    """The enabled binary (``deb``) sources of ``sources_dir`` as apt reads them: ``sources.list``,
    ``sources.list.d/*.list`` (one-line format) and ``sources.list.d/*.sources`` (deb822)."""
    found: list[AptSource] = []
    lists = [sources_dir / "sources.list", *sorted((sources_dir / "sources.list.d").glob("*.list"))]
    for path in lists:
        if path.is_file():
            for line in path.read_text().splitlines():
                found.extend(_one_line_source(line))
    for path in sorted((sources_dir / "sources.list.d").glob("*.sources")):
        for stanza in re.split(r"\n[ \t]*\n", path.read_text()):
            found.extend(_deb822_sources(stanza))
    return found


def _one_line_source(line: str) -> list[AptSource]:
    """``deb [options] URI SUITE COMPONENT...``; nothing for other lines."""
    line = re.sub(r"\[[^\]]*\]", " ", line.split("#", 1)[0])  # options may hold spaces
    parts = line.split()
    if len(parts) < 3 or parts[0] != "deb":
        return []
    return [AptSource(parts[1], parts[2], tuple(parts[3:]))]


def _deb822_sources(stanza: str) -> list[AptSource]:
    """The sources of one deb822 stanza (``Types``, ``URIs``, ``Suites``, ``Components``,
    ``Enabled``); folded lines continue a field, ``#`` lines are comments."""
    fields: dict[str, str] = {}
    name = ""
    for line in stanza.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line[0] in " \t" and name:
            fields[name] += " " + line.strip()
        elif ":" in line:
            name, value = line.split(":", 1)
            name = name.strip().lower()
            fields[name] = value.strip()
    if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
        return []
    components = tuple(fields.get("components", "").split())
    return [
        AptSource(uri, suite, components)
        for uri in fields.get("uris", "").split()
        for suite in fields.get("suites", "").split()
    ]


def apt_origin(source: AptSource, lists_dir: Path) -> str:
    """The ``Origin`` of ``source``'s Release file in apt's lists (``Debian`` for Debian's archive);
    empty when apt has not fetched it."""
    name = re.sub(r"^[a-z0-9+.-]+://", "", f"{source.uri.rstrip('/')}/dists/{source.suite}/")
    name = "".join(f"%{ord(c):02x}" if c in _APT_QUOTED else c for c in name).replace("/", "_")
    for release in ("InRelease", "Release"):
        path = lists_dir / f"{name}{release}"
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        match = re.search(r"^Origin:[ \t]*(.+)$", text, re.MULTILINE)
        return match.group(1).strip() if match else ""
    return ""


def host_mirror(sources_dir: Path = Path("/etc/apt"), lists_dir: Path = APT_LISTS) -> str:
    """The Debian mirror this host's apt uses for bookworm main (MCO_TESTBED_MIRROR overrides): of
    the enabled ``deb`` sources of suite bookworm with component main, the one apt's lists say is
    Debian's archive (``Origin: Debian``), else the first whose path ends in ``/debian``. Raises
    TestbedError when there is none: a node image comes from the mirror the host uses.

    The mirror is not one of the image's inputs (:func:`image_hash`): every Debian mirror serves the
    same signed archive, and which one built an image does not change what the package list asks
    for; an image follows the archive only when rebuilt (``--rebuild``), whichever mirror it uses."""
    override = os.environ.get("MCO_TESTBED_MIRROR")
    if override:
        return override
    candidates = [s for s in apt_sources(sources_dir) if s.suite == SUITE and "main" in s.components and "://" in s.uri]
    debian = [s for s in candidates if apt_origin(s, lists_dir) == "Debian"]
    named = [s for s in candidates if s.uri.rstrip("/").endswith("/debian")]
    for source in debian or named:
        return source.uri.rstrip("/")
    raise TestbedError(
        f"no Debian {SUITE} main source in {sources_dir} (sources.list, sources.list.d/*.list or *.sources, "
        f"enabled, Types: deb): add the mirror this host uses, or set MCO_TESTBED_MIRROR to a Debian mirror's URL "
        f"(the one ending in /debian)"
    )


def ensure_image(*, root: Path | None = None, packages_file: Path = PACKAGES_FILE, rebuild: bool = False) -> Path:
    """Return the image directory for the current inputs, building it first when missing."""
    root = root or cache_root()
    target = image_path(root, packages_file)
    if target.is_dir() and not rebuild:
        return target
    system.preflight()
    mirror = host_mirror()
    packages = read_packages(packages_file)

    def build(scratch: Path) -> None:
        _build(scratch, packages, mirror)
        (scratch / "etc" / "mco-testbed-image").write_text(f"{target.name}\n")

    return cache.build_once(target, build, rebuild=rebuild)


def prune_images(*, root: Path | None = None, keep: Path | None = None) -> list[Path]:
    """Remove images other than ``keep`` (default: the current one) that no mounted overlay uses."""
    root = root or cache_root()
    keep = keep or image_path(root)
    in_use = Path("/proc/self/mountinfo").read_text()
    removed = []
    with cache.locked(root):
        for candidate in sorted(root.glob("image-*")):
            if candidate != keep and f"lowerdir={candidate}" not in in_use:
                system.remove_tree(candidate)
                removed.append(candidate)
    return removed


def _build(scratch: Path, packages: list[str], mirror: str) -> None:
    print(f"testbed: building the node image ({len(packages)} packages from {mirror}); takes ~1-2 min once")
    argv = [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(packages)}",
        "--components=main",
        SUITE,
        str(scratch),
        mirror,
    ]
    try:
        system.run(argv, timeout=BUILD_TIMEOUT_SECONDS)
    finally:
        system.unmount_tree(scratch)  # debootstrap leaves /proc and /sys mounted when it fails
    _configure(scratch)


def _configure(rootfs: Path) -> None:
    """Make the debootstrapped tree boot fast and quietly as a disposable test node."""
    etc = rootfs / "etc"
    resolv = etc / "resolv.conf"
    resolv.unlink(missing_ok=True)
    resolv.write_text(RESOLV_CONF)
    # Empty machine-id: systemd derives a fresh one from the container UUID on every boot.
    (etc / "machine-id").write_text("")
    (rootfs / "var" / "lib" / "dbus" / "machine-id").unlink(missing_ok=True)
    (etc / "hostname").unlink(missing_ok=True)
    (etc / "ssh" / "sshd_config.d").mkdir(parents=True, exist_ok=True)
    (etc / "ssh" / "sshd_config.d" / "mco-testbed.conf").write_text(SSHD_DROPIN)
    ssh_dir = rootfs / "root" / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    for timer in DISABLED_TIMERS:
        (etc / "systemd" / "system" / "timers.target.wants" / timer).unlink(missing_ok=True)
    for deb in (rootfs / "var" / "cache" / "apt" / "archives").glob("*.deb"):
        deb.unlink()
    missing = [p for p in ("usr/bin/python3", "usr/sbin/sshd", "lib/systemd/systemd") if not (rootfs / p).exists()]
    if missing:
        raise TestbedError(f"image build incomplete, missing {', '.join(missing)}; check testbed/packages.txt")
