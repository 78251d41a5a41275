#!/usr/bin/python
# Copyright: Many-Core Orchestrator authors
# Mulan PSL v2 (see LICENSE)
"""Add or remove one path in the top-level ``imports`` list of containerd's config.toml."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: containerd_imports
short_description: Manage one entry of the imports list in containerd's config.toml
description:
  - Adds or removes one path in the top-level C(imports = [...]) array of containerd's
    C(config.toml), editing only that line (or lines, for a multi-line array). Every other
    byte of the file is kept.
  - When the file does not exist and O(state=present), creates it with
    C(version = <version>) and the C(imports) line.
  - When the file has no C(imports) key, inserts one after the C(version) line (or at the
    top), before the first table header, where TOML requires top-level keys.
  - Supports check mode and diff mode.
version_added: "0.1.0"
author: Many-Core Orchestrator authors
options:
  path:
    description: containerd configuration file.
    type: path
    default: /etc/containerd/config.toml
  entry:
    description: Path to add to or remove from C(imports).
    type: str
    required: true
  state:
    description: Whether O(entry) is in the list.
    type: str
    choices: [present, absent]
    default: present
  version:
    description: Config version written when the file is created (2 for containerd 1.x, 3 for 2.x).
    type: int
    default: 2
  mode:
    description: Mode of a created file.
    type: str
    default: "0644"
"""

EXAMPLES = r"""
- name: Import the Kata drop-in
  containerd_imports:
    path: /etc/containerd/config.toml
    entry: /etc/containerd/conf.d/kata.toml
    version: 2
"""

RETURN = r"""
imports:
  description: The imports list after the change.
  returned: always
  type: list
  elements: str
  sample: ["/etc/containerd/conf.d/kata.toml"]
created:
  description: Whether the file was created.
  returned: always
  type: bool
"""

import json  # noqa: E402 - Ansible modules import after DOCUMENTATION
import os  # noqa: E402
import re  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

_IMPORTS = re.compile(r"^imports\s*=\s*\[", re.MULTILINE)
_STRING = re.compile(r"\"((?:[^\"\\]|\\.)*)\"|'([^']*)'")
_TABLE = re.compile(r"^\s*\[", re.MULTILINE)
_VERSION = re.compile(r"^version\s*=.*$", re.MULTILINE)


class ImportsError(ValueError):
    """The file cannot be edited safely."""


def _render(entries: list[str]) -> str:
    return "imports = [" + ", ".join(json.dumps(e) for e in entries) + "]"


def _find_array(text: str) -> tuple[int, int, list[str]] | None:
    """(start, end, entries) of the top-level imports array, end exclusive of the newline."""
    first_table = _TABLE.search(text)
    limit = first_table.start() if first_table else len(text)
    match = _IMPORTS.search(text, 0, limit)
    if match is None:
        return None
    close = text.find("]", match.end())
    if close < 0:
        raise ImportsError("the imports array in the containerd config is not closed with ']'")
    body = text[match.end() : close]
    entries = [m.group(1) if m.group(1) is not None else m.group(2) for m in _STRING.finditer(body)]
    return match.start(), close + 1, entries


def _insert_line(text: str, line: str) -> str:
    """Insert a top-level key line after ``version = ..`` (if before any table) or at the top."""
    version_match = _VERSION.search(text)
    first_table = _TABLE.search(text)
    if version_match and (first_table is None or version_match.start() < first_table.start()):
        at = min(version_match.end() + 1, len(text))
        prefix = text[:at] if text[:at].endswith("\n") else text[:at] + "\n"
        return prefix + line + text[at:]
    return line + text


def edit(text: str | None, entry: str, state: str, version: int) -> tuple[str | None, list[str]]:
    """New file text (None = no file) and the resulting imports list."""
    if text is None:
        if state == "absent":
            return None, []
        return f"version = {version}\n{_render([entry])}\n", [entry]
    found = _find_array(text)
    if found is None:
        return (text, []) if state == "absent" else (_insert_line(text, _render([entry]) + "\n"), [entry])
    start, end, entries = found
    if state == "present" and entry not in entries:
        entries = [*entries, entry]
    elif state == "absent" and entry in entries:
        entries = [e for e in entries if e != entry]
    else:
        return text, entries
    return text[:start] + _render(entries) + text[end:], entries


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "default": "/etc/containerd/config.toml"},
            "entry": {"type": "str", "required": True},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "version": {"type": "int", "default": 2},
            "mode": {"type": "str", "default": "0644"},
        },
        supports_check_mode=True,
    )
    path: str = module.params["path"]
    before: str | None = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            before = handle.read()
    try:
        after, entries = edit(before, module.params["entry"], module.params["state"], module.params["version"])
    except ImportsError as exc:
        module.fail_json(msg=f"{path}: {exc}; fix the file by hand")
    changed = after != before
    result: dict[str, Any] = {"changed": changed, "imports": entries, "created": before is None and after is not None}
    if module._diff:
        result["diff"] = {"before": before or "", "after": after or "", "before_header": path, "after_header": path}
    if changed and not module.check_mode and after is not None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        tmp = f"{path}.mco-tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(after)
        if before is None:  # an existing file keeps its own mode and owner (atomic_move copies them)
            module.set_mode_if_different(tmp, module.params["mode"], False)
        module.atomic_move(tmp, path)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
