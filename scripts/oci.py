"""Image archives that containerd imports (``ctr -n k8s.io images import FILE``) and ``docker load``
takes, written without a Docker daemon or a registry: what scripts/build_schedulers.py and
scripts/build_images.py share.

An archive is an OCI image layout with a Docker ``manifest.json`` beside it (the form of ``docker
save`` since Docker 25) holding one image: one gzip layer made from a list of entries (files,
directories, symbolic links with their modes and owners), a config for linux/amd64 (containerd
unpacks only an image whose config names the platform). Every time in it is the epoch and the
entries are written in path order, so the same entries make the same bytes and digests.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import posixpath
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EPOCH = 0  # file times and image creation: fixed, so the same entries make the same image
ARCHITECTURE, OS = "amd64", "linux"
_OCI = "application/vnd.oci.image"


class ImageError(ValueError):
    """The entries do not describe one file tree (a relative or repeated path, a file under a link)."""


@dataclass(frozen=True)
class File:
    """A regular file at ``path`` (absolute, in the image) with the bytes of ``source``."""

    path: str
    source: Path | bytes
    mode: int = 0o644
    uid: int = 0
    gid: int = 0


@dataclass(frozen=True)
class Dir:
    """A directory. Parents no entry names are made root-owned with mode 0755."""

    path: str
    mode: int = 0o755
    uid: int = 0
    gid: int = 0


@dataclass(frozen=True)
class Symlink:
    """A symbolic link at ``path`` to ``target`` (as written: relative to the link's directory, or
    absolute in the image)."""

    path: str
    target: str


Entry = File | Dir | Symlink


@dataclass(frozen=True)
class Config:
    """The run settings of an image (the ``config`` object of the OCI image config)."""

    entrypoint: tuple[str, ...]
    """The program and its first arguments; a pod's ``command`` replaces it."""
    user: str
    """``uid:gid``, numeric: the kubelet's ``runAsNonRoot`` check can only trust a number."""
    env: tuple[str, ...] = ()
    """``NAME=value`` items."""
    cmd: tuple[str, ...] = ()
    """Default arguments after the entrypoint; a pod's ``args`` replace them."""
    working_dir: str = ""
    """The process's current directory (empty: ``/``)."""
    exposed_ports: tuple[str, ...] = ()
    """``6379/tcp`` items: documentation for tools, containerd opens nothing."""

    def to_json(self) -> dict[str, Any]:
        """The OCI form; empty settings are left out."""
        out: dict[str, Any] = {"Entrypoint": list(self.entrypoint), "User": self.user}
        if self.env:
            out["Env"] = list(self.env)
        if self.cmd:
            out["Cmd"] = list(self.cmd)
        if self.working_dir:
            out["WorkingDir"] = self.working_dir
        if self.exposed_ports:
            out["ExposedPorts"] = {port: {} for port in self.exposed_ports}
        return out


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _parts(path: str) -> tuple[str, ...]:
    if not path.startswith("/") or posixpath.normpath(path) != path or path == "/":
        raise ImageError(f"{path!r}: an entry's path must be absolute and normal (no '..', '//' or trailing '/')")
    return tuple(path[1:].split("/"))


def _tree(entries: Sequence[Entry]) -> list[Entry]:
    """``entries`` and the parent directories they leave out, in path order (parents first)."""
    by_parts: dict[tuple[str, ...], Entry] = {}
    for entry in entries:
        parts = _parts(entry.path)
        if parts in by_parts:
            raise ImageError(f"{entry.path}: named twice ({by_parts[parts]} and {entry})")
        by_parts[parts] = entry
    for parts in list(by_parts):
        for depth in range(1, len(parts)):
            parent = by_parts.setdefault(parts[:depth], Dir("/" + "/".join(parts[:depth])))
            if not isinstance(parent, Dir):
                raise ImageError(f"{'/'.join(('', *parts))}: its parent {parent.path} is not a directory")
    return [by_parts[parts] for parts in sorted(by_parts)]


def layer(entries: Sequence[Entry]) -> bytes:
    """An uncompressed tar of ``entries`` (member names without the leading ``/``, times fixed)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in _tree(entries):
            info = tarfile.TarInfo(entry.path[1:])
            info.mtime = EPOCH
            if isinstance(entry, Symlink):
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, entry.target, 0o777
                tar.addfile(info)
            elif isinstance(entry, Dir):
                info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, entry.mode, entry.uid, entry.gid
                tar.addfile(info)
            elif isinstance(entry.source, bytes):
                info.size, info.mode, info.uid, info.gid = len(entry.source), entry.mode, entry.uid, entry.gid
                tar.addfile(info, io.BytesIO(entry.source))
            else:
                info.size, info.mode, info.uid, info.gid = entry.source.stat().st_size, entry.mode, entry.uid, entry.gid
                with entry.source.open("rb") as fh:
                    tar.addfile(info, fh)
    return buf.getvalue()


def write_image(
    entries: Sequence[Entry], config: Config, archive: Path, ref: str, *, created_by: str
) -> dict[str, str]:
    """Write ``archive`` (whole or not at all): the image ``ref`` of one layer holding ``entries``.
    ``created_by`` names the program in the image's history. Returns the digests of its manifest,
    config and uncompressed layer (``layerDiffID``)."""
    tar = layer(entries)
    blob = gzip.compress(tar, compresslevel=6, mtime=EPOCH)
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(EPOCH))
    image_config = json.dumps(
        {
            "architecture": ARCHITECTURE,
            "os": OS,
            "created": created,
            "config": config.to_json(),
            "rootfs": {"type": "layers", "diff_ids": [_sha(tar)]},
            "history": [{"created": created, "created_by": created_by}],
        },
        sort_keys=True,
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": f"{_OCI}.manifest.v1+json",
            "config": {"mediaType": f"{_OCI}.config.v1+json", "digest": _sha(image_config), "size": len(image_config)},
            "layers": [{"mediaType": f"{_OCI}.layer.v1.tar+gzip", "digest": _sha(blob), "size": len(blob)}],
        },
        sort_keys=True,
    ).encode()
    tag = ref.rsplit(":", 1)[1]
    index = {
        "schemaVersion": 2,
        "mediaType": f"{_OCI}.index.v1+json",
        "manifests": [
            {
                "mediaType": f"{_OCI}.manifest.v1+json",
                "digest": _sha(manifest),
                "size": len(manifest),
                "platform": {"architecture": ARCHITECTURE, "os": OS},
                "annotations": {"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag},
            }
        ],
    }

    def path(data: bytes) -> str:
        return "blobs/sha256/" + _sha(data).split(":", 1)[1]

    docker = [{"Config": path(image_config), "RepoTags": [ref], "Layers": [path(blob)]}]
    files = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(index, sort_keys=True).encode(),
        "manifest.json": json.dumps(docker).encode(),
        path(image_config): image_config,
        path(manifest): manifest,
        path(blob): blob,
    }
    tmp = archive.with_name(f".{archive.name}.partial")
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as out:
        for directory in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, EPOCH
            out.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, EPOCH
            out.addfile(info, io.BytesIO(data))
    os.replace(tmp, archive)
    return {"manifest": _sha(manifest), "config": _sha(image_config), "layerDiffID": _sha(tar)}
