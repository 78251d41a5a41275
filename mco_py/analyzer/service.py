"""The analyzer's gRPC endpoint: many collector streams at once on one asyncio loop.

``grpc.aio`` keeps thousands of long-lived streams on one thread (a thread-pool server
would need one worker per open stream). The loop runs in its own thread so the rest of
the analyzer (report loop, rules watcher, leader election) stays plain threads.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import ssl
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from mco_py.analysis.guard import GuardChange
from mco_py.analysis.samples import InvalidSample, node_name_problem
from mco_py.analyzer.engine import Engine, Outcome
from mco_py.analyzer.workloads import WorkloadIndex
from mco_py.config.analyzer import DEFAULT_MAX_MESSAGE_BYTES
from mco_py.errors import ConfigError
from mco_py.obs.files import Stamp, file_stamps
from mco_py.obs.logging import OnceFilter, RateLimit, truncate
from mco_py.obs.pki import BadRequest, Signer, SigningRefused
from mco_py.rpc import codec
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb
from mco_py.rpc.analyzer.v1 import analyzer_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TLSFiles:
    """Server certificate and key; with ``ca``, clients must present a certificate signed by it (mTLS).

    The server reads them again whenever one of the files changes: a renewed certificate, or a CA
    trust bundle changed for a rotation, serves the next handshake with no restart, and the streams
    already open stay up (TLS is checked once per connection).
    """

    cert: Path
    key: Path
    ca: Path | None = None

    def load(self) -> grpc.ServerCertificateConfiguration:
        """The files as they are now; raises ConfigError when they are unreadable or do not match."""
        try:
            cert = self.cert.read_bytes()
            key = self.key.read_bytes()
            ca = self.ca.read_bytes() if self.ca else None
        except OSError as exc:
            raise ConfigError(f"TLS file {exc.filename}: cannot read: {exc.strerror}; check --tls-* paths") from exc
        try:  # what gRPC would only find at the next handshake
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.cert, self.key)
            if self.ca:
                context.load_verify_locations(cadata=ca.decode("ascii", "replace") if ca else None)
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigError(
                f"TLS files {self.cert}, {self.key}{', ' + str(self.ca) if self.ca else ''}: not a certificate, "
                f"its key and PEM CA certificates ({exc}); check --tls-* paths"
            ) from exc
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)

    def credentials(self) -> grpc.ServerCredentials:
        reloader = TLSReloader(self)
        return grpc.dynamic_ssl_server_credentials(
            reloader.initial,
            reloader.fetch,  # type: ignore[arg-type]  # gRPC documents None as "unchanged"; the stubs omit it
            require_client_authentication=self.ca is not None,
        )


class TLSReloader:
    """Hands gRPC the TLS files again when they changed (asked at each new connection's handshake).

    Files replaced one at a time (a certificate, then its key) may not match for a moment: such a
    state, or an unreadable file, keeps the last good files and is logged once.
    """

    def __init__(self, files: TLSFiles) -> None:
        self.files = files
        self._seen = self._stat()
        self.initial = files.load()  # a bad file at start is the operator's to fix: ConfigError
        self._once = OnceFilter()
        self._lock = threading.Lock()
        self.reloads = 0

    def _stat(self) -> tuple[Stamp, ...]:
        return file_stamps((self.files.cert, self.files.key, self.files.ca))

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """gRPC's certificate_configuration_fetcher: None while nothing changed."""
        with self._lock:
            return self._fetch()

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        seen = self._stat()
        if seen == self._seen:
            return None
        try:
            loaded = self.files.load()
        except ConfigError as exc:
            if self._once.first(str(exc)):
                log.warning("TLS files changed but cannot be used yet, the last good ones serve: %s", exc)
            return None
        self._seen = seen
        self.reloads += 1
        log.info("TLS files changed: new connections get the new certificate and trust bundle")
        return loaded


def load_token(path: Path) -> str:
    """The bearer token from ``path`` (surrounding whitespace ignored)."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"token file {path}: cannot read: {exc.strerror or exc}") from exc
    if not token:
        raise ConfigError(f"token file {path} is empty; put the shared bearer token in it")
    return token


def cert_node_names(auth_context: Mapping[str, Iterable[bytes]]) -> frozenset[str] | None:
    """Node names a client certificate may report for (CN and SANs); None without a client certificate."""
    if "x509_pem_cert" not in auth_context and "x509_common_name" not in auth_context:
        return None
    names: set[str] = set()
    for key in ("x509_common_name", "x509_subject_alternative_name"):
        for raw in auth_context.get(key, []):
            names.add(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw))
    return frozenset(names)


#: Nodes one stream gets pods for and may post guard Events for (a collector is one node; a relay more).
MAX_STREAM_NODES = 8


class AnalyzerServicer(pb_grpc.AnalyzerServicer):
    """Decodes batches, lets the engine score them, acks each batch with its rejections.

    The first message on a stream is :func:`codec.features` (what this analyzer reads beyond
    the stream's first version); the next, and the one after an ack whenever the rules
    changed, is :func:`codec.send_early`: the warn values of the rules in force.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        token: str | None = None,
        require_client_cert: bool = False,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        workloads: WorkloadIndex | None = None,
        post_change: Callable[[GuardChange], None] | None = None,
        signer: Signer | None = None,
    ) -> None:
        self.engine = engine
        self.signer = signer
        """Signs collectors' renewals (a control host's signing CA); None: Renew is refused."""
        self.workloads = workloads
        """Pods by node: each stream's node gets its pods with their class (cluster mode)."""
        self.post_change = post_change
        """Posts a guard change as an Event on its Node (cluster mode)."""
        self.token = token
        self.require_client_cert = require_client_cert
        self.max_message_bytes = max_message_bytes
        self._once = OnceFilter()
        self._reject_log = RateLimit(burst=20, interval=60.0)
        """Rejection lines name what the peer sent: at most 20 a minute, however many peers and names."""
        self._renew_log = RateLimit(burst=20, interval=60.0)
        """Renewal lines (signed or refused; the counter counts each): at most 20 a minute, however many callers."""

    def _oversize(self, batch: pb.SampleBatch, collector: str) -> Outcome | None:
        """Every sample of ``batch`` rejected as ``oversize_message`` when it is over the limit, else None."""
        size = batch.ByteSize()
        if size <= self.max_message_bytes:
            return None
        outcome = Outcome()
        exc = InvalidSample(
            "oversize_message",
            f"batch {batch.sequence} from {collector or 'an unnamed collector'} is {size} bytes, over the analyzer's "
            f"maxMessageBytes {self.max_message_bytes}; send fewer samples per batch or raise --max-message-bytes",
        )
        outcome.reject(exc, count=len(batch.samples) or 1)
        self.engine.count(outcome)
        return outcome

    def _after_ack(
        self,
        batch: pb.SampleBatch,
        allowed: frozenset[str] | None,
        collector: str,
        nodes: dict[str, tuple[int, int] | None],
        generation: int,
    ) -> tuple[int, list[pb.Control]]:
        """New rules (SendEarly, guard rules) and pods for the stream; the guard changes it carried posted."""
        out = []
        if self.engine.rules_generation != generation:
            generation, above = self.engine.send_early_thresholds()
            out += self._rules_controls(above)
        for sample in batch.samples:  # the stream's own nodes: the first 8 it may and did report for
            if len(nodes) >= MAX_STREAM_NODES:
                break
            node = sample.node
            if node not in nodes and node_name_problem(node) is None and (allowed is None or node in allowed):
                nodes[node] = None
        if batch.guard_actions:
            self._changes(batch.guard_actions, nodes, collector)
        if self.workloads is not None:
            out += self._workloads(nodes)
        return generation, out

    def _rules_controls(self, above: Mapping[str, float]) -> list[pb.Control]:
        """SendEarly, and the guard's rules when the rules in force have them."""
        guard = self.engine.rules.guard
        out = [codec.send_early(above)]
        if guard is not None:
            out.append(codec.guard_rules_to_proto(guard))
        return out

    def _changes(self, actions: Iterable[pb.GuardAction], nodes: Mapping[str, object], collector: str) -> None:
        """Each guard change of one of the stream's own nodes, as an Event (at most 64 a batch)."""
        if self.post_change is None:
            return
        for msg in list(actions)[: codec.MAX_GUARD_ACTIONS]:
            try:
                change = codec.guard_change_from_proto(msg)
            except ValueError as exc:
                self._note(collector, "invalid_guard_action", str(exc))
                continue
            if change.node not in nodes:
                problem = f"guard action for node {change.node[:253]!r}, not a node this stream reports samples for"
                self._note(collector, "guard_action_node", problem)
                continue
            self.post_change(change)

    def _workloads(self, nodes: dict[str, tuple[int, int] | None]) -> list[pb.Control]:
        """The pods of this stream's nodes, for each node whose pods changed since last sent."""
        assert self.workloads is not None
        out = []
        for node, sent in nodes.items():
            version = self.workloads.version(node)
            if version is None or (version, self.engine.rules_generation) == sent:
                continue
            pods = self.workloads.pods_of(node)
            if pods is not None:
                nodes[node] = (version, self.engine.rules_generation)
                out.append(codec.workloads_to_proto(node, pods))
        return out

    def _note(self, collector: str, reason: str, message: str) -> None:
        if self._once.first(f"{collector}\0{reason}") and self._reject_log.allow() is not None:
            log.warning("collector %s: %s", collector[:80], truncate(message, 300), extra={"reason": reason})

    async def _authorize(self, context: grpc.aio.ServicerContext[Any, Any]) -> frozenset[str] | None:
        metrics = self.engine.metrics
        if self.token is not None:
            presented = ""
            for key, value in context.invocation_metadata() or ():
                if key == "authorization":
                    presented = value if isinstance(value, str) else value.decode("utf-8", "replace")
            scheme, _, token = presented.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self.token.encode()):
                metrics.batches_rejected.labels("unauthenticated").inc()
                await context.abort(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "missing or wrong bearer token; send metadata 'authorization: Bearer <token>' "
                    "with the analyzer's token",
                )
        if not self.require_client_cert:
            return None
        allowed = cert_node_names(context.auth_context())
        if not allowed:
            metrics.batches_rejected.labels("permission_denied").inc()
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                "the client certificate names no node (CN or DNS SAN); issue one per node",
            )
        return allowed

    async def Renew(
        self, request: pb.RenewRequest, context: grpc.aio.ServicerContext[pb.RenewRequest, pb.RenewResponse]
    ) -> pb.RenewResponse:
        """Sign a collector's renewal for exactly the identity of the client certificate it called with."""
        await self._authorize(context)
        if self.signer is None:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                "this analyzer has no signing CA (tlsSignerCert/tlsSignerKey); the controller reissues "
                "certificates (playbooks/mco.yml)",
            )
        assert self.signer is not None
        peer = b"".join(context.auth_context().get("x509_pem_cert", []))
        try:
            chain = await asyncio.to_thread(self.signer.sign_request, bytes(request.csr_pem), peer)
        except SigningRefused as exc:
            code = (
                grpc.StatusCode.INVALID_ARGUMENT if isinstance(exc, BadRequest) else grpc.StatusCode.PERMISSION_DENIED
            )
            names = sorted(cert_node_names(context.auth_context()) or ())
            held_back = self._renew_log.allow()
            if held_back is not None:
                log.warning(
                    "certificate renewal refused for %s: %s",
                    ",".join(names)[:200],
                    truncate(str(exc), 300),
                    extra={"heldBack": held_back},
                )
            self.engine.metrics.renewals_signed.labels("refused").inc()
            await context.abort(code, str(exc))
        names = sorted(cert_node_names(context.auth_context()) or ())
        held_back = self._renew_log.allow()
        if held_back is not None:
            log.info(
                "signed a renewed certificate for %s",
                ",".join(names)[:200],
                extra={"names": names[:8], "heldBack": held_back},
            )
        self.engine.metrics.renewals_signed.labels("signed").inc()
        return pb.RenewResponse(certificate_chain_pem=chain)

    async def StreamSamples(
        self,
        request_iterator: AsyncIterator[pb.SampleBatch],
        context: grpc.aio.ServicerContext[pb.SampleBatch, pb.Control],
    ) -> AsyncIterator[pb.Control]:
        allowed = await self._authorize(context)
        engine = self.engine
        engine.metrics.collectors.inc()
        collector = ""
        generation, above = engine.send_early_thresholds()
        nodes: dict[str, tuple[int, int] | None] = {}
        """This stream's nodes (at most 8), and the pods' and the rules' versions last sent to each."""
        try:
            yield codec.features()
            for control in self._rules_controls(above):
                yield control
            async for batch in request_iterator:
                collector = batch.collector[:253]
                if batch.dropped_since_last:
                    engine.metrics.collector_dropped.inc(batch.dropped_since_last)
                oversize = self._oversize(batch, collector)
                if oversize is not None:
                    outcome = oversize
                else:
                    outcome = engine.accept_messages(batch.samples, Outcome(), allowed_nodes=allowed)
                for reason, message in outcome.reasons.items():
                    if self._once.first(f"{collector}\0{reason}"):
                        held_back = self._reject_log.allow()
                        if held_back is None:
                            continue
                        log.warning(
                            "collector %s: samples rejected (%s); logged once per collector and reason",
                            collector[:80],
                            truncate(message, 300),
                            extra={"collector": collector[:80], "reason": reason, "heldBack": held_back},
                        )
                yield codec.ack(batch.sequence, outcome.accepted, outcome.rejected, outcome.reasons.values())
                generation, controls = self._after_ack(batch, allowed, collector, nodes, generation)
                for control in controls:
                    yield control
        finally:
            engine.metrics.collectors.dec()
            log.debug("collector stream closed", extra={"collector": collector})


class GrpcServer:
    """A running ``grpc.aio`` server on its own event-loop thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, server: grpc.aio.Server, thread: threading.Thread) -> None:
        self._loop = loop
        self._server = server
        self._thread = thread

    def stop(self, grace: float = 1.0) -> None:
        """Close every stream (after ``grace`` seconds) and end the loop thread."""
        if not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self._server.stop(grace), self._loop)
        fut.result(timeout=grace + 10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


def transport_limit(max_message_bytes: int) -> int:
    """The gRPC receive limit for a ``max_message_bytes`` setting (the servicer rejects what lies between)."""
    return min(4 * max_message_bytes, 2**31 - 1)


def create_server(
    engine: Engine,
    *,
    listen: str = "[::]:9876",
    tls: TLSFiles | None = None,
    token: str | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    workloads: WorkloadIndex | None = None,
    post_change: Callable[[GuardChange], None] | None = None,
    signer: Signer | None = None,
) -> tuple[GrpcServer, int]:
    """Start the analyzer's gRPC server; returns it and the bound port (``listen`` may use port 0)."""
    credentials = tls.credentials() if tls else None
    servicer = AnalyzerServicer(
        engine,
        token=token,
        require_client_cert=bool(tls and tls.ca),
        max_message_bytes=max_message_bytes,
        workloads=workloads,
        post_change=post_change,
        signer=signer if tls and tls.ca else None,  # renewal needs the caller's verified client certificate
    )
    started: Future[tuple[grpc.aio.Server, int]] = Future()
    loop = asyncio.new_event_loop()

    async def start() -> None:
        server = grpc.aio.server(
            options=[
                # up to 4x the limit is read and rejected by the servicer (counted, acked, stream kept);
                # beyond that the transport ends the stream with RESOURCE_EXHAUSTED (memory bound)
                ("grpc.max_receive_message_length", transport_limit(max_message_bytes)),
                ("grpc.max_send_message_length", 1024 * 1024),
                ("grpc.so_reuseport", 0),
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_ping_interval_without_data_ms", 5000),
            ]
        )
        pb_grpc.add_AnalyzerServicer_to_server(servicer, server)
        port = server.add_secure_port(listen, credentials) if credentials else server.add_insecure_port(listen)
        await server.start()
        started.set_result((server, port))

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(start())
        except BaseException as exc:
            started.set_exception(exc)
            loop.close()
            return
        loop.run_forever()
        loop.close()

    thread = threading.Thread(target=run, name="grpc-loop", daemon=True)
    thread.start()
    try:
        server, port = started.result(timeout=30)
    except Exception as exc:
        if not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        raise ConfigError(f"cannot serve gRPC on {listen}: {exc}; check --listen and the TLS files") from exc
    return GrpcServer(loop, server, thread), port
