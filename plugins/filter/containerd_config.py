# Copyright: Many-Core Orchestrator authors
# Mulan PSL v2 (see LICENSE)
"""What containerd's config.toml declares for the CRI plugin's runtimes, and whether a block of
new runtime tables fits into it: for the kata_runtime role on containerd 1.x.

containerd 1.x (config version 2) *replaces* a plugin's whole section with an imported file's
(containerd issues 5837 and 7982; 2.0 merges them, containerd PR 9982). A drop-in carrying Kata's
runtimes would silently discard the node's own CRI settings: ``sandbox_image`` (an air-gapped
node then tries to pull ``registry.k8s.io/pause``), registry mirrors, ``restrict_oom_score_adj``,
runc's options. So on 1.x the role writes Kata's runtime tables into config.toml itself, as a
marked block. TOML defines a table once: the role must know which runtimes the rest of the file
declares (runc: the block declares it only when the file does not, since decoding a runtimes
table replaces the default one and the CRI plugin's default runtime must exist; ``kata-<shim>``:
the operator's own, refused) and that the file with the block still parses (an inline
``runtimes = {...}`` cannot take more tables).

Filters:
  containerd_cri_runtimes(text, version=2, marker='') -> runtime names declared outside the block
  containerd_with_block(text, block, marker, version=2) -> the file's text with the block in place
  containerd_without_block(text, marker)              -> the file's text without it
"""

from __future__ import annotations

import tomllib
from typing import Any

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - only outside Ansible
    AnsibleFilterError = ValueError  # type: ignore[misc,assignment]

#: The CRI plugin's key in each config version.
CRI_PLUGIN = {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}


class ContainerdConfigError(ValueError):
    """The file is not TOML, or would not be with the block."""


def _markers(marker: str) -> tuple[str, str]:
    """The lines ansible.builtin.blockinfile writes for ``marker`` (its ``{mark}`` placeholder)."""
    return marker.replace("{mark}", "BEGIN"), marker.replace("{mark}", "END")


def without_block(text: str, marker: str) -> str:
    """``text`` without the lines from the block's BEGIN marker to its END marker."""
    if not marker:
        return text
    begin, end = _markers(marker)
    kept, inside = [], False
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        if stripped == begin:
            inside = True
        elif stripped == end and inside:
            inside = False
        elif not inside:
            kept.append(line)
    return "".join(kept)


def _parse(text: str, what: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ContainerdConfigError(f"{what} is not valid TOML ({exc}); fix it, then run the role again") from exc


def cri_runtimes(text: str, version: int = 2, marker: str = "") -> list[str]:
    """The runtimes the CRI plugin section of ``text`` declares outside the block, sorted."""
    plugin = CRI_PLUGIN.get(int(version))
    if plugin is None:
        raise ContainerdConfigError(f"containerd config version {version} is not 2 or 3")
    doc = _parse(without_block(str(text or ""), marker), "the containerd config")
    node: Any = doc
    for key in ("plugins", plugin, "containerd", "runtimes"):
        node = node.get(key) if isinstance(node, dict) else None
    return sorted(node) if isinstance(node, dict) else []


def with_block(text: str, block: str, marker: str, version: int = 2) -> str:
    """``text`` with ``block`` between its markers at the end, any earlier copy removed; an empty
    file gets ``version = <version>`` first. Raises ContainerdConfigError unless the result is valid
    TOML, or when a file with settings has another version (containerd reads a file without a
    ``version`` line as version 1, where the block's table names mean nothing)."""
    begin, end = _markers(marker)
    base = without_block(str(text or ""), marker)
    found = _parse(base, "the containerd config").get("version")
    if (
        found is None
        and base.strip(" \t\r\n")
        and any(line.strip() and not line.lstrip().startswith("#") for line in base.splitlines())
    ):
        raise ContainerdConfigError(
            f"the containerd config has settings but no 'version = {version}' line: containerd reads it as "
            f"version 1, where Kata's runtime tables would mean nothing. Convert it (containerd config migrate) "
            f"and add 'version = {version}' at the top, then run the role again"
        )
    if found is not None and found != version:
        raise ContainerdConfigError(
            f"the containerd config says version = {found}, not {version} as containerd expects"
        )
    if found is None:
        base = f"version = {version}\n" + base
    if not base.endswith("\n"):
        base += "\n"
    result = f"{base}{begin}\n{block.strip()}\n{end}\n"
    _parse(result, "the containerd config with the Kata runtimes added")
    return result


def _wrap(func: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ContainerdConfigError as exc:
            raise AnsibleFilterError(str(exc)) from exc

    return wrapper


class FilterModule:
    """containerd_cri_runtimes / containerd_with_block / containerd_without_block."""

    def filters(self) -> dict[str, Any]:
        return {
            "containerd_cri_runtimes": _wrap(cri_runtimes),
            "containerd_with_block": _wrap(with_block),
            "containerd_without_block": _wrap(without_block),
        }
