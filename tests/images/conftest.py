"""The image set of scripts/build_images.py, built once per session (or found in its cache)."""

from __future__ import annotations

from typing import Any

import pytest

from scripts import build_images


@pytest.fixture(scope="session")
def built() -> dict[str, Any]:
    """``{"dir", "images": {name: {"image", "archive", ...}}}`` from the default cache
    (``${MCO_CACHE:-~/.cache/mco}/images``), built first when it is not there."""
    return build_images.images()
