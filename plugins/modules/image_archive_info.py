#!/usr/bin/python
# Copyright: Many-Core Orchestrator authors
# Mulan PSL v2 (see LICENSE)
"""Read the image names, digests and platforms of an OCI image-layout archive (what ``ctr images import`` takes)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: image_archive_info
short_description: Names, digests and platforms of the images in an OCI image archive
description:
  - Reads C(index.json) of an image archive (an OCI image layout in a tar file, as
    C(scripts/build_schedulers.py) and C(docker save) since Docker 25 write them) and lists
    each image it names, with the digest containerd records for it after
    C(ctr images import) (the descriptor's digest, shown by C(ctr images ls)) and the
    platforms of its manifests.
  - Reads only; never changes anything. Supports check mode.
version_added: "0.1.0"
author: Many-Core Orchestrator authors
options:
  path:
    description: The archive (tar).
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Read the scheduler image archive on the controller
  image_archive_info:
    path: /root/.cache/mco/scheduler-bin/KEY/vc-scheduler.image.tar
  delegate_to: localhost
  register: archive
"""

RETURN = r"""
images:
  description: One entry per named image of C(index.json).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Image reference (annotation C(io.containerd.image.name)).
      type: str
      sample: mco.many-core.io/vc-scheduler:v1.14.1-mco0.1.0
    digest:
      description: Digest of the image's manifest (or index) descriptor.
      type: str
      sample: sha256:227a98c041874f1b3b520bb801421dee80fe78ad4b8ee1b376204b4c52584e13
    media_type:
      description: Media type of that descriptor.
      type: str
    platforms:
      description: os/architecture of each manifest (from the descriptor, else from the image config).
      type: list
      elements: str
      sample: [linux/amd64]
"""

import json  # noqa: E402 - Ansible modules import after DOCUMENTATION
import tarfile  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

NAME = "io.containerd.image.name"
INDEX_TYPES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
#: Indexes and manifests are small; a member this large is not one.
MAX_JSON = 4 * 1024 * 1024


class ArchiveError(ValueError):
    """The file is not an image archive this module can read."""


def _json(tar: tarfile.TarFile, name: str) -> Any:
    try:
        member = tar.getmember(name)
    except KeyError as exc:
        raise ArchiveError(f"has no {name}") from exc
    if not member.isfile() or member.size > MAX_JSON:
        raise ArchiveError(f"{name} is not a small regular file")
    handle = tar.extractfile(member)
    if handle is None:
        raise ArchiveError(f"cannot read {name}")
    try:
        return json.loads(handle.read())
    except ValueError as exc:
        raise ArchiveError(f"{name} is not JSON: {exc}") from exc


def _blob(tar: tarfile.TarFile, digest: str) -> Any:
    algorithm, _, hexdigest = str(digest).partition(":")
    return _json(tar, f"blobs/{algorithm}/{hexdigest}")


def _platform(platform: Any) -> str:
    return f"{platform.get('os', '')}/{platform.get('architecture', '')}" if isinstance(platform, dict) else ""


def _platforms(tar: tarfile.TarFile, descriptor: dict[str, Any]) -> list[str]:
    if descriptor.get("mediaType") in INDEX_TYPES:
        nested = _blob(tar, descriptor["digest"]).get("manifests") or []
        return sorted({p for d in nested for p in _platforms(tar, d)})
    named = _platform(descriptor.get("platform"))
    if named:
        return [named]
    manifest = _blob(tar, descriptor["digest"])
    config = _blob(tar, manifest["config"]["digest"])
    return [_platform(config)]


def read(path: str) -> list[dict[str, Any]]:
    """The named images of the archive at ``path``."""
    try:
        with tarfile.open(path, mode="r:*") as tar:
            index = _json(tar, "index.json")
            images = []
            for descriptor in index.get("manifests") or []:
                name = (descriptor.get("annotations") or {}).get(NAME)
                if not name:
                    continue
                images.append(
                    {
                        "name": name,
                        "digest": descriptor["digest"],
                        "media_type": descriptor.get("mediaType", ""),
                        "platforms": _platforms(tar, descriptor),
                    }
                )
    except (OSError, tarfile.TarError, KeyError, TypeError, AttributeError) as exc:
        raise ArchiveError(f"cannot be read as an OCI image archive: {exc}") from exc
    if not images:
        raise ArchiveError(f"names no image (no {NAME} annotation in index.json)")
    return images


def main() -> None:
    module = AnsibleModule(argument_spec={"path": {"type": "path", "required": True}}, supports_check_mode=True)
    path: str = module.params["path"]
    try:
        images = read(path)
    except ArchiveError as exc:
        module.fail_json(msg=f"{path} {exc}; give the image archive scripts/build_schedulers.py wrote")
    module.exit_json(changed=False, images=images)


if __name__ == "__main__":
    main()
