"""Settings for tests, read the way the services read them (:mod:`mco_py.config.loader`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mco_py.config.collector import SPEC as COLLECTOR
from mco_py.config.collector import CollectorSettings
from mco_py.config.loader import load, parse_document


def collector_settings(
    text: str | None = None, *, env: Mapping[str, str] | None = None, flags: Mapping[str, Any] | None = None
) -> CollectorSettings:
    """``text`` as collector.yaml, then ``env``, then ``flags`` (key → value)."""
    document = parse_document(text, "collector.yaml") if text is not None else None
    return load(COLLECTOR, document=document, source="collector.yaml", env=env, flags=flags).settings
