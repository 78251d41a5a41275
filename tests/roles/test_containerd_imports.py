"""containerd_imports: one imports entry edited, the rest of config.toml kept byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.roles.helpers import adhoc_json, load_module

mod = load_module("plugins/modules/containerd_imports.py", "containerd_imports")
ENTRY = "/etc/containerd/conf.d/kata.toml"
DEBIAN_16 = (
    "#   Copyright 2018-2022 Docker Inc.\n"
    "\n"
    '#disabled_plugins = ["cri"]\n'
    "version = 2\n"
    "\n"
    '[plugins."io.containerd.grpc.v1.cri"]\n'
    '  sandbox_image = "registry.k8s.io/pause:3.6"\n'
)


def test_missing_file_is_created_with_version_and_imports() -> None:
    assert mod.edit(None, ENTRY, "present", 2) == (f'version = 2\nimports = ["{ENTRY}"]\n', [ENTRY])
    assert mod.edit(None, ENTRY, "present", 3)[0].startswith("version = 3\n")
    assert mod.edit(None, ENTRY, "absent", 2) == (None, [])


def test_imports_line_goes_after_version_before_any_table() -> None:
    out, entries = mod.edit(DEBIAN_16, ENTRY, "present", 2)
    assert entries == [ENTRY]
    assert out == DEBIAN_16.replace("version = 2\n", f'version = 2\nimports = ["{ENTRY}"]\n')
    assert mod.edit(out, ENTRY, "present", 2) == (out, [ENTRY])  # idempotent
    back, entries = mod.edit(out, ENTRY, "absent", 2)
    assert entries == []
    assert back == DEBIAN_16.replace("version = 2\n", "version = 2\nimports = []\n")


def test_existing_multiline_imports_keep_their_entries() -> None:
    text = 'version = 2\nimports = [\n  "/etc/a.toml",\n  \'/etc/b/*.toml\',\n]\n[grpc]\n  address = "/run/x.sock"\n'
    out, entries = mod.edit(text, ENTRY, "present", 2)
    assert entries == ["/etc/a.toml", "/etc/b/*.toml", ENTRY]
    assert out.endswith('[grpc]\n  address = "/run/x.sock"\n')
    _, entries = mod.edit(out, ENTRY, "absent", 2)
    assert entries == ["/etc/a.toml", "/etc/b/*.toml"]


def test_no_version_line_puts_imports_on_top() -> None:
    out, _ = mod.edit('[grpc]\n  address = "/x"\n', ENTRY, "present", 2)
    assert out.startswith(f'imports = ["{ENTRY}"]\n[grpc]')


def test_imports_inside_a_table_is_not_the_top_level_key() -> None:
    text = 'version = 2\n[plugins.x]\n  imports = ["nope"]\n'
    out, entries = mod.edit(text, ENTRY, "present", 2)
    assert entries == [ENTRY]
    assert out.endswith('[plugins.x]\n  imports = ["nope"]\n')


def test_unclosed_array_is_an_error() -> None:
    with pytest.raises(mod.ImportsError, match="not closed"):
        mod.edit('imports = ["/a"\n', ENTRY, "present", 2)


def test_module_in_check_mode_changes_nothing_then_writes(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(DEBIAN_16)
    config.chmod(0o600)
    result = adhoc_json("containerd_imports", f"path={config} entry={ENTRY}", "plugins/modules")
    assert result["changed"] is True
    assert ENTRY in config.read_text()
    assert config.stat().st_mode & 0o777 == 0o600
    again = adhoc_json("containerd_imports", f"path={config} entry={ENTRY}", "plugins/modules")
    assert again["changed"] is False
