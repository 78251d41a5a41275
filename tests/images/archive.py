"""Reading an image archive back as containerd would: index, manifest, config, and the layer's
members with links resolved inside the image (never on this host)."""

from __future__ import annotations

import gzip
import io
import json
import posixpath
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: glibc's default search path on Debian amd64 (`ld.so --help`); the images have no ld.so.cache
SYSTEM_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib")


@dataclass(frozen=True)
class Image:
    files: dict[str, bytes]
    """The archive's own files (oci-layout, index.json, manifest.json, blobs/...)."""
    index: dict[str, Any]
    manifest: dict[str, Any]
    config: dict[str, Any]
    layer: bytes
    """The uncompressed layer tar."""
    members: dict[str, tarfile.TarInfo]
    """Layer members by absolute path."""

    def blob(self, digest: str) -> bytes:
        return self.files["blobs/sha256/" + digest.split(":", 1)[1]]

    def data(self, path: str) -> bytes:
        with tarfile.open(fileobj=io.BytesIO(self.layer)) as tar:
            fh = tar.extractfile(self.members[path].name)
            assert fh is not None, path
            return fh.read()

    def resolve(self, path: str) -> str | None:
        """``path`` with every link in it followed inside the image; None when it leads nowhere."""
        parts = [p for p in path.split("/") if p]
        done = ""
        for _ in range(64):  # a link loop ends here
            if not parts:
                return done or "/"
            candidate = f"{done}/{parts.pop(0)}"
            member = self.members.get(candidate)
            if member is None:
                return None
            if member.issym():
                base = "/" if member.linkname.startswith("/") else posixpath.dirname(candidate)
                target = posixpath.normpath(posixpath.join(base, member.linkname))
                parts = [p for p in target.split("/") if p] + parts
                done = ""
            else:
                done = candidate
        return None


def read(archive: Path) -> Image:
    with tarfile.open(archive) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    index = json.loads(files["index.json"])
    (entry,) = index["manifests"]
    manifest = json.loads(files["blobs/sha256/" + entry["digest"].split(":", 1)[1]])
    config = json.loads(files["blobs/sha256/" + manifest["config"]["digest"].split(":", 1)[1]])
    (layer_ref,) = manifest["layers"]
    layer = gzip.decompress(files["blobs/sha256/" + layer_ref["digest"].split(":", 1)[1]])
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        members = {"/" + m.name.rstrip("/"): m for m in tar.getmembers()}
    return Image(files, index, manifest, config, layer, members)
