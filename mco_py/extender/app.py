"""Request handling of the scheduler extender, independent of the HTTP server.

Fail-open, always: whatever the body, the report or an internal error, the
Volcano routes answer 200 with a reply Volcano accepts (predicate: pass;
prioritize: a complete non-negative ``nodeScore`` and an empty
``errorMessage``), and the kube-scheduler routes echo every node as passing
(``Error`` is set only when the body cannot be decoded at all).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from mco_py.analysis.policy import (
    PolicySettings,
    ReportState,
    Sensitivity,
    filter_node,
    kube_score,
    parse_sensitivity,
    report_state,
    volcano_score,
)
from mco_py.errors import DecodeError
from mco_py.extender import wire
from mco_py.extender.metrics import ExtenderMetrics
from mco_py.extender.source import LabelLookup, ReportSource
from mco_py.obs.http_app import Request, Response
from mco_py.obs.logging import truncate

log = logging.getLogger(__name__)

JSON = "application/json"
TEXT = "text/plain; charset=utf-8"


class _Decoded(Protocol):
    @property
    def slow_path(self) -> bool: ...


_Req = TypeVar("_Req", bound=_Decoded)

_VOLCANO_PATH = re.compile(r"^/volcano(?:/v(?P<version>\d+(?:\.\d+)*))?/(?P<verb>predicate|prioritize)$")
_SLASHES = re.compile(r"/{2,}")
_LOG_INTERVAL = 1.0


def volcano_format(version: str | None, default: str) -> str | None:
    """Reply format for a URL version segment; None when the segment names no supported Volcano."""
    if version is None:
        return default
    parts = version.split(".")
    major = int(parts[0])
    minor = int(parts[1]) if len(parts) > 1 else 0
    if major > 1 or (major == 1 and minor >= 10):
        return "1.10"
    if major == 1 and minor == 9:
        return "1.9"
    return None


class ExtenderApp:
    """Routes requests to the Volcano and kube-scheduler handlers; never raises."""

    def __init__(
        self,
        *,
        policy: PolicySettings,
        source: ReportSource,
        labels: LabelLookup,
        decoder: wire.Decoder,
        registry: CollectorRegistry,
        volcano_version: str = "1.9",
        clock: Callable[[], float] = time.time,
        ready: Callable[[], bool] | None = None,
    ) -> None:
        self.policy = policy
        self.source = source
        self.labels = labels
        self.decoder = decoder
        self.metrics = ExtenderMetrics(registry, self.state)
        self.volcano_version = volcano_version
        self.clock = clock
        self._ready = ready
        self._last_log: dict[str, float] = {}
        self._routes: dict[str, tuple[str, str, str | None]] = {}
        self._suppressed: dict[str, int] = {}
        self._handlers: dict[str, Callable[[bytes | bytearray], Response]] = {
            "volcano_prioritize": self._volcano_prioritize,
            "kube_filter": self._kube_filter,
            "kube_prioritize": self._kube_prioritize,
        }
        # Predicate passes are most replies: encoded once per reply format.
        self._predicate_pass = {
            version: self._json(wire.volcano_predicate_reply(version, None)) for version in ("1.9", "1.10")
        }

    # -- state ----------------------------------------------------------

    def state(self) -> ReportState:
        """The report as the policy sees it now."""
        snap = self.source.snapshot()
        return report_state(
            snap.report, now=self.clock(), settings=self.policy, problem=snap.problem, unreadable=snap.unreadable
        )

    # -- entry point ----------------------------------------------------

    def route_of(self, path: str) -> tuple[str, str, str | None]:
        """(normalised path, bounded route label, Volcano reply format or None) for ``path``; cached."""
        cached = self._routes.get(path)
        if cached is not None:
            return cached
        clean = _SLASHES.sub("/", path.split("?", 1)[0])
        match = _VOLCANO_PATH.match(clean)
        version: str | None = None
        if match:
            route = f"volcano_{match['verb']}"
            version = volcano_format(match["version"], self.volcano_version)
        else:
            route = {
                "/kube/filter": "kube_filter",
                "/kube/prioritize": "kube_prioritize",
                "/metrics": "metrics",
                "/healthz": "healthz",
                "/readyz": "readyz",
            }.get(clean, "other")
        result = (clean, route, version)
        if route != "other" and len(self._routes) < 256:  # only known routes: a scanner cannot grow it
            self._routes[path] = result
        return result

    def handle(self, request: Request) -> Response:
        """Answer one request (:class:`mco_py.obs.http_app.App`)."""
        started = time.perf_counter()
        clean, route, version = self.route_of(request.path)
        try:
            response = self._dispatch(
                request.method, clean, route, version=version, body=request.body, too_large=request.too_large
            )
        except Exception:  # fail open: no request may ever get a 5xx or an error body
            self._internal_error(route, "internal error; answering fail-open")
            response = self._fail_open(route)
        self.metrics.request(route, response.status, time.perf_counter() - started)
        return response

    def _dispatch(  # noqa: PLR0911 - a router: one return per route
        self, method: str, path: str, route: str, *, version: str | None, body: bytes | bytearray, too_large: bool
    ) -> Response:
        if route in ("metrics", "healthz", "readyz"):
            return self._get(method, route)
        if route == "other":
            return Response(404, TEXT, f"no route {truncate(path, 100)}; see docs/extender.md\n".encode())
        if method != "POST":
            return Response(405, TEXT, b"use POST\n")
        if too_large:
            self.metrics.decode_errors.labels(route, "too-large").inc()
            self._log_problem(route, "request body over maxBodyBytes; answering fail-open", b"")
            return self._fail_open(route)
        if route.startswith("volcano_") and version is None:
            return Response(404, TEXT, b"unsupported Volcano version in the URL; use v1.9 or v1.10\n")
        if route == "volcano_predicate" and version is not None:
            return self._volcano_predicate(version, body)
        return self._handlers[route](body)

    def _get(self, method: str, route: str) -> Response:
        if method not in ("GET", "HEAD"):
            return Response(405, TEXT, b"use GET\n")
        if route == "metrics":
            return Response(200, CONTENT_TYPE_LATEST, generate_latest(self.metrics.registry))
        if route == "healthz":
            return Response(200, TEXT, b"ok\n")
        return self._readyz()

    # -- helpers --------------------------------------------------------

    def _json(self, obj: object) -> Response:
        return Response(200, JSON, self.decoder.encode(obj))

    def _fail_open(self, route: str) -> Response:
        """The reply that never blocks scheduling, for when nothing could be decoded."""
        if route == "volcano_predicate":
            self.metrics.decision(route, "pass", "fail-open")
            return self._json({})  # `{}` is a pass in every Volcano version
        if route == "volcano_prioritize":
            return self._json(wire.volcano_prioritize_reply({}))
        if route == "kube_filter":
            # Nodes unknown: an error makes an ignorable extender be skipped (null lists would filter every node).
            error = "mco: request not processed (too large or internal error); skip this extender"
            return self._json(wire.kube_filter_reply(wire.KubeArgs(wire.PodRef(), None, None), (), {}, error=error))
        if route == "kube_prioritize":
            return self._json([])
        return Response(200, TEXT, b"")

    def _may_log(self, key: str) -> int | None:
        """None when ``key`` was logged less than a second ago (counted), else the count suppressed since.

        Keys are routes and fixed labels (bounded), so a misbehaving peer can neither flood the log
        nor grow this state."""
        now = time.monotonic()
        if now - self._last_log.get(key, -_LOG_INTERVAL) < _LOG_INTERVAL:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return None
        self._last_log[key] = now
        return self._suppressed.pop(key, 0)

    def _log_problem(self, route: str, message: str, body: bytes | bytearray) -> None:
        """Log at most once a second per route."""
        suppressed = self._may_log(route)
        if suppressed is None:
            return
        log.warning(
            message,
            extra={
                "route": route,
                "body": truncate(body[:600].decode("utf-8", "replace"), 500),
                "bodyBytes": len(body),
                "suppressedSinceLast": suppressed,
            },
        )

    def _internal_error(self, route: str, message: str) -> None:
        """Count an exception being handled; its traceback is logged at most once a second per route."""
        self.metrics.internal_errors.labels(route).inc()
        suppressed = self._may_log(f"internal:{route}")
        if suppressed is not None:
            log.exception(message, extra={"route": route, "suppressedSinceLast": suppressed})

    def _decode_failed(self, route: str, exc: DecodeError, body: bytes | bytearray) -> None:
        self.metrics.decode_errors.labels(route, "invalid").inc()
        self._log_problem(route, f"undecodable request; answering fail-open: {exc}", body)

    def _decode(self, route: str, decode: Callable[[bytes | bytearray], _Req], body: bytes | bytearray) -> _Req | None:
        """``decode(body)``, counting a slow-path decode; None (logged, counted) when it cannot be decoded."""
        try:
            req = decode(body)
        except DecodeError as exc:
            self._decode_failed(route, exc, body)
            return None
        if req.slow_path:
            self.metrics.slow_decodes.labels(route).inc()
        return req

    # -- Volcano --------------------------------------------------------

    def _volcano_predicate(self, version: str, body: bytes | bytearray) -> Response:
        route = "volcano_predicate"
        req = self._decode(route, self.decoder.volcano_predicate, body)
        if req is None:
            return self._fail_open(route)
        if req.node is None:
            self.metrics.decode_errors.labels(route, "no-node").inc()
            self._log_problem(route, "predicate request names no node; answering pass", body)
            return self._json(wire.volcano_predicate_reply(version, None))
        verdict = filter_node(
            self.state(),
            node=req.node.name,
            labels=req.node.labels,
            runtime_class=req.pod.runtime_class,
            settings=self.policy,
        )
        if verdict.passed:
            self.metrics.decision(route, "pass", verdict.rule)
            return self._predicate_pass[version]
        self.metrics.decision(route, "reject", verdict.rule)
        log.debug(
            "node rejected",
            extra={"node": req.node.name, "pod": f"{req.pod.namespace}/{req.pod.name}", "reason": verdict.reason},
        )
        return self._json(wire.volcano_predicate_reply(version, verdict.reason))

    def _volcano_prioritize(self, body: bytes | bytearray) -> Response:
        route = "volcano_prioritize"
        req = self._decode(route, self.decoder.volcano_prioritize, body)
        if req is None:
            return self._fail_open(route)
        try:
            state = self.state()
            sensitivity, reason = self._sensitivity(req.pod, state)
            scores = {name: volcano_score(state, name, self.policy, sensitivity) for name in req.nodes}
        except Exception:
            self._internal_error(route, "internal error in prioritize; equal scores for every node")
            neutral = max(0.0, self.policy.unknown_score * self.policy.score_weight)
            scores, reason = dict.fromkeys(req.nodes, neutral), "fail-open"
        self.metrics.decision(route, "score", reason, len(scores))
        return self._json(wire.volcano_prioritize_reply(scores))

    # -- kube-scheduler -------------------------------------------------

    def _kube_labels(self, node: wire.NodeRef) -> Mapping[str, str] | None:
        return node.labels if node.labels is not None else self.labels.labels(node.name)

    def _kube_filter(self, body: bytes | bytearray) -> Response:
        route = "kube_filter"
        try:
            args = self.decoder.kube_args(body)
        except DecodeError as exc:
            self._decode_failed(route, exc, body)
            # The only case with `Error`: kube-scheduler skips the extender when it is ignorable.
            return self._json(wire.kube_filter_reply(wire.KubeArgs(wire.PodRef(), None, None), (), {}, error=str(exc)))
        if args.slow_path:
            self.metrics.slow_decodes.labels(route).inc()
        candidates: list[wire.NodeRef] = list(args.nodes or ())
        if args.node_names is not None:
            known = {n.name for n in candidates}
            candidates += [wire.NodeRef(name) for name in args.node_names if name not in known]
        try:
            state = self.state()
            passed: list[str] = []
            failed: dict[str, str] = {}
            counts: dict[tuple[str, str], int] = {}
            for node in candidates:
                verdict = filter_node(
                    state,
                    node=node.name,
                    labels=self._kube_labels(node),
                    runtime_class=args.pod.runtime_class,
                    settings=self.policy,
                )
                result = "pass" if verdict.passed else "reject"
                counts[(result, verdict.rule)] = counts.get((result, verdict.rule), 0) + 1
                if verdict.passed:
                    passed.append(node.name)
                else:
                    failed[node.name] = verdict.reason
        except Exception:
            self._internal_error(route, "internal error in kube filter; every node passes")
            return self._json(wire.kube_filter_reply(args, (n.name for n in candidates), {}))
        for (result, rule), count in counts.items():
            self.metrics.decision(route, result, rule, count)
        return self._json(wire.kube_filter_reply(args, passed, failed))

    def _kube_prioritize(self, body: bytes | bytearray) -> Response:
        route = "kube_prioritize"
        try:
            args = self.decoder.kube_args(body)
        except DecodeError as exc:
            self._decode_failed(route, exc, body)
            return self._json([])
        if args.slow_path:
            self.metrics.slow_decodes.labels(route).inc()
        names = [n.name for n in args.nodes or () if n.name] if args.nodes is not None else list(args.node_names or ())
        state = self.state()
        sensitivity, reason = self._sensitivity(args.pod, state)
        scores = {name: kube_score(state, name, self.policy, sensitivity) for name in names}
        self.metrics.decision(route, "score", reason, len(scores))
        return self._json(wire.kube_prioritize_reply(scores))

    def _sensitivity(self, pod: wire.PodRef, state: ReportState) -> tuple[Sensitivity | None, str]:
        """The pod's dimension weights (None: score by the node level) and the decision reason label:
        ``fallback`` (basic mode), ``report`` (node score), ``dimensions`` (the pod's weights) or
        ``invalid-hint`` (node score: the annotation could not be read)."""
        if state.basic_mode:
            return None, "fallback"
        if pod.sensitive_to is None:
            return None, "report"
        try:
            return parse_sensitivity(pod.sensitive_to), "dimensions"
        except ValueError as exc:
            self._log_problem(
                "invalid-hint",
                f"pod {pod.namespace}/{pod.name}: annotation {wire.SENSITIVE_TO} {exc}; scored by node level",
                b"",
            )
            return None, "invalid-hint"

    def _readyz(self) -> Response:
        ready = self._ready() if self._ready is not None else self.source.snapshot().synced
        state = self.state()
        text = (
            f"{'ready' if ready else 'not ready'}; mode={'basic' if state.basic_mode else 'report'}; {state.detail}\n"
        )
        return Response(200 if ready else 503, TEXT, text.encode())
