"""docs/images.md shows only commands tests/images/test_containerd.py runs, and the refs it names
are the ones the build gives."""

from __future__ import annotations

import re
from typing import Any

from tests.docs.doc_commands import commands, select
from tests.images.test_containerd import DOC, DOC_COMMANDS


def test_every_command_the_doc_shows_is_run_by_the_containerd_test() -> None:
    shown = {c.command for c in commands(DOC)}
    run = {command for section, match in DOC_COMMANDS for command in select(DOC, section, match)}
    assert shown == run, f"shown but run by nothing: {sorted(shown - run)}"


def test_the_sandbox_image_the_doc_configures_is_the_pause_image_built(built: dict[str, Any]) -> None:
    text = DOC.read_text()
    configured = re.findall(r'sandbox_image = "([^"]+)"', text)
    assert configured == [built["images"]["pause"]["image"]]
    assert f"`{built['images']['pause']['image']}`" in text, "the table names the pause image's ref"
