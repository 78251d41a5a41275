"""Validate documents against a CRD's openAPIV3Schema with jsonschema.

Kubernetes structural schemas are a subset of JSON Schema (plus x-kubernetes-*
extensions, which jsonschema ignores), so a Draft 7 validator with a format
checker enforces the same types, required fields, enums and bounds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "mco_py" / "data" / "crds" / "nodeinterferencereports.yaml"


def load_crd() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
    return doc


def schema_for(version: str = "v1alpha1") -> dict[str, Any]:
    for v in load_crd()["spec"]["versions"]:
        if v["name"] == version:
            schema: dict[str, Any] = v["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(version)


def errors(document: dict[str, Any], version: str = "v1alpha1") -> list[str]:
    validator = jsonschema.Draft7Validator(schema_for(version), format_checker=jsonschema.FormatChecker())
    return sorted(
        f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in validator.iter_errors(document)
    )
