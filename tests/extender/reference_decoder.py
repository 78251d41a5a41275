"""The reference reading of extender requests: the standard library's ``json`` and the wire module's Go-like
walk. The service decodes with msgspec only; the tests hold its reading (fast pass, simdjson, raw walk)
equal to this one."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mco_py.errors import DecodeError
from mco_py.extender import wire


class _StdlibWalk(wire.Walk):
    def obj(self, value: Any) -> Mapping[str, Any] | None:
        return value if isinstance(value, dict) else None

    def seq(self, value: Any) -> Sequence[Any] | None:
        return value if isinstance(value, list) else None

    def text(self, value: Any) -> str | None:
        return value if isinstance(value, str) else None


_WALK = _StdlibWalk()


class StdlibDecoder:
    """A :class:`~mco_py.extender.wire.Decoder`: ``json.loads`` and the case-insensitive walk."""

    name = "stdlib"

    @staticmethod
    def _load(body: bytes | bytearray) -> dict[str, Any]:
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise DecodeError(f"request body is not valid JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise DecodeError("request body is JSON but not an object")
        return doc

    def volcano_predicate(self, body: bytes | bytearray) -> wire.VolcanoPredicate:
        return _WALK.volcano_predicate(self._load(body))

    def volcano_prioritize(self, body: bytes | bytearray) -> wire.VolcanoPrioritize:
        return _WALK.volcano_prioritize(self._load(body))

    def kube_args(self, body: bytes | bytearray) -> wire.KubeArgs:
        return _WALK.kube_args(self._load(body))

    def encode(self, obj: object) -> bytes:
        return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()


def decoder_named(name: str) -> wire.Decoder:
    """The service's decoder (``msgspec``) or the reference (``stdlib``)."""
    return wire.MsgspecDecoder() if name == "msgspec" else StdlibDecoder()
