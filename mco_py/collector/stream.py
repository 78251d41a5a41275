"""gRPC client stream to the analyzers, and the sample -> protobuf conversion.

One :class:`AnalyzerStream` per analyzer address (collectors stream to every
replica), on grpc.aio in its own thread. Each keeps a bounded send buffer (oldest sample dropped and counted
when full), runs ``Analyzer.StreamSamples`` in its own thread and re-opens it
after failures with exponential backoff and jitter. Samples are batched by the flush
interval, except that a sample with a signal above the analyzer's SendEarly value (the
rules' warn), and the first one after, goes at once. Optional TLS/mTLS and a
bearer token (``authorization: Bearer <token>``, read from a file at each
connect so it can be rotated).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import random
import ssl
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from mco_py import __version__
from mco_py.analysis.guard import GuardChange
from mco_py.collector.signals import Absence, NodeSample, Reading, StreamStatus
from mco_py.config.collector import StreamSettings
from mco_py.errors import ConfigError
from mco_py.obs.files import Stamp, file_stamps
from mco_py.obs.logging import OnceFilter
from mco_py.rpc.analyzer.v1 import analyzer_pb2 as pb
from mco_py.rpc.analyzer.v1 import analyzer_pb2_grpc as pb_grpc
from mco_py.rpc.codec import MAX_GUARD_ACTIONS, guard_change_to_proto, guard_rules_from_proto, workloads_from_proto

if TYPE_CHECKING:
    from mco_py.collector.guard.loop import NodeGuard

log = logging.getLogger(__name__)

_KINDS: dict[Absence, pb.AbsenceKind.ValueType] = {
    Absence.UNSUPPORTED: pb.ABSENCE_KIND_UNSUPPORTED,
    Absence.PERMISSION: pb.ABSENCE_KIND_PERMISSION,
    Absence.READ_ERROR: pb.ABSENCE_KIND_READ_ERROR,
    Absence.INSUFFICIENT_DATA: pb.ABSENCE_KIND_INSUFFICIENT_DATA,
    Absence.DISABLED: pb.ABSENCE_KIND_DISABLED,
    Absence.WARMING_UP: pb.ABSENCE_KIND_WARMING_UP,
}


def reading_to_proto(reading: Reading) -> pb.Signal:
    """One reading as a ``Signal`` (value or absence, backend, device, events)."""
    signal = pb.Signal(name=reading.name, device=reading.device, backend=reading.backend)
    if reading.value is not None:
        signal.value = reading.value
    else:
        kind = (
            _KINDS.get(reading.absence, pb.ABSENCE_KIND_UNSPECIFIED) if reading.absence else pb.ABSENCE_KIND_UNSPECIFIED
        )
        signal.absent.CopyFrom(pb.Absence(kind=kind, reason=reading.reason))
    if reading.events is not None:
        signal.events = max(0, reading.events)
    return signal


def sample_to_proto(sample: NodeSample) -> pb.Sample:
    """One collector sample as the wire ``Sample``; signal names are the report keys.

    The plain readings (a value, no device, no event count) go packed (``value_names`` and
    ``values``), the others one ``Signal`` each; :func:`unpacked` turns it into the stream's
    first form for an analyzer that did not announce the packed one.
    """
    packed: dict[str, float] = {}
    signals: list[pb.Signal] = []
    for r in sample.readings:
        if r.value is not None and not r.device and r.events is None and r.name not in packed:
            packed[r.name] = r.value
        else:
            signals.append(reading_to_proto(r))
    return pb.Sample(
        node=sample.node,
        timestamp_unix_nanos=round(sample.timestamp * 1e9),
        value_names=packed.keys(),
        values=packed.values(),
        signals=signals,
        interval_ms=max(0, round(sample.interval * 1000)),
    )


def unpacked(msg: pb.Sample) -> pb.Sample:
    """``msg`` with its packed values as one ``Signal`` each: the form every analyzer reads."""
    if not msg.value_names:
        return msg
    signals = [pb.Signal(name=name, value=value) for name, value in zip(msg.value_names, msg.values, strict=True)]
    signals += msg.signals
    return pb.Sample(
        node=msg.node, timestamp_unix_nanos=msg.timestamp_unix_nanos, signals=signals, interval_ms=msg.interval_ms
    )


def is_hot(values: Mapping[str, float], above: Mapping[str, float]) -> bool:
    """True when a signal of ``values`` is above its value in ``above``."""
    for name, limit in above.items():
        value = values.get(name)
        if value is not None and value > limit:
            return True
    return False


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{what} {path}: cannot read ({exc.strerror or exc}); fix the path or its permissions"
        ) from exc


def channel_credentials(config: StreamSettings) -> grpc.ChannelCredentials | None:
    """TLS credentials from the configured files; None for plaintext."""
    if config.tls_ca is None and config.tls_cert is None and config.tls_key is None:
        return None
    if (config.tls_cert is None) != (config.tls_key is None):
        raise ConfigError("stream.tlsCert and stream.tlsKey go together (the mTLS client certificate and its key)")
    return grpc.ssl_channel_credentials(
        root_certificates=_read(config.tls_ca, "stream.tlsCa") if config.tls_ca else None,
        private_key=_read(config.tls_key, "stream.tlsKey") if config.tls_key else None,
        certificate_chain=_read(config.tls_cert, "stream.tlsCert") if config.tls_cert else None,
    )


class ChannelTLS:
    """The stream's TLS files, read again for a new connection when one of them changed.

    A renewed client certificate, or a CA trust bundle changed for a rotation, is used from the
    next connection on; the stream already open stays up. Files replaced one at a time (a
    certificate, then its key) may not match for a moment: such a state keeps the last good files.
    """

    def __init__(self, config: StreamSettings) -> None:
        self.config = config
        self._seen = self._stat()
        self.current = channel_credentials(config)  # bad files at start: ConfigError
        self._once = OnceFilter()

    def _stat(self) -> tuple[Stamp, ...]:
        return file_stamps((self.config.tls_ca, self.config.tls_cert, self.config.tls_key))

    def credentials(self) -> grpc.ChannelCredentials | None:
        """The credentials for a new connection (re-read when a file changed)."""
        seen = self._stat()
        if seen == self._seen or self.current is None:
            return self.current
        config = self.config
        try:
            if config.tls_cert and config.tls_key:
                ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(config.tls_cert, config.tls_key)
            if config.tls_ca:
                ssl.create_default_context(cafile=config.tls_ca)
            fresh = channel_credentials(config)
        except (ConfigError, ssl.SSLError, OSError, ValueError) as exc:
            if self._once.first(str(exc)):
                log.warning("stream TLS files changed but cannot be used yet, the last good ones serve: %s", exc)
            return self.current
        self._seen, self.current = seen, fresh
        log.info("stream TLS files changed: the next connection uses the new certificate and trust bundle")
        return fresh


def metadata(config: StreamSettings) -> tuple[tuple[str, str], ...]:
    """The call metadata: the bearer token (read now) when ``stream.tokenFile`` is set."""
    if config.token_file is None:
        return ()
    token = _read(config.token_file, "stream.tokenFile").decode("utf-8", "replace").strip()
    if not token:
        raise ConfigError(f"stream.tokenFile {config.token_file} is empty; put the shared bearer token in it")
    return (("authorization", f"Bearer {token}"),)


#: Longest a stop waits for the last batch to be sent and acknowledged, seconds.
LAST_FLUSH_S = 1.0


class AnalyzerStream:
    """The stream to one analyzer, with its own buffer and reconnect loop.

    The loop runs on grpc.aio in its own thread with its own event loop: the
    synchronous gRPC API polls in 0.1-0.2 s steps in several threads, which
    costs more CPU than the whole sample at a 1 s interval.
    """

    def __init__(
        self,
        target: str,
        config: StreamSettings,
        *,
        collector_id: str,
        on_set_interval: Callable[[float], None] | None = None,
        on_guard: Callable[[pb.Control], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.target = target
        self._on_guard = on_guard
        self._changes: collections.deque[pb.GuardAction] = collections.deque(maxlen=MAX_GUARD_ACTIONS)
        self._config = config
        self._collector_id = collector_id
        self._on_set_interval = on_set_interval
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self._tls = ChannelTLS(config)
        self._buffer: collections.deque[pb.Sample] = collections.deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._once = OnceFilter()
        self._sent = self._dropped = self._dropped_unreported = self._reconnects = self._acked = 0
        self._connected = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._acked_all: asyncio.Event | None = None  # set once nothing is in flight (the last flush)
        self._idle = False  # the writer waits for a sample: publish() must wake it
        self._flushing = False  # the writer lets samples gather: only an urgent one wakes it
        self._urgent: asyncio.Event | None = None
        self._above: dict[str, float] = {}
        """Signal values above which a sample goes at once (the analyzer's SendEarly); empty: batch all."""
        self._packed = False
        """The analyzer of the current stream reads packed values (its Features said so)."""
        self._was_hot = False
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._thread_main, name=f"stream-{target}", daemon=True)

    def start(self) -> None:
        """Start the connect/stream loop."""
        self._thread.start()

    def publish(self, sample: pb.Sample, values: Mapping[str, float] | None = None) -> None:
        """Queue ``sample``; drops (and counts) the oldest when the buffer is full.

        ``values`` (the sample's node-wide values by signal) decide whether it is urgent: while any
        signal is above the analyzer's SendEarly value, and for the first sample after, it ends the
        writer's flush wait instead of waiting for the flush interval.
        """
        with self._lock:
            if len(self._buffer) >= self._config.buffer_samples:
                self._buffer.popleft()
                self._dropped += 1
                self._dropped_unreported += 1
            self._buffer.append(sample)
            hot = values is not None and is_hot(values, self._above)
            urgent = hot or self._was_hot
            self._was_hot = hot
        if self._idle:  # while the writer sleeps out the flush interval, a wake-up would be wasted
            self._call_soon(self._wake)
        elif urgent and self._flushing:
            self._call_soon(self._urgent)

    def add_changes(self, changes: Sequence[pb.GuardAction]) -> None:
        """Send the guard's limit changes with the next batch (the newest 64 while none goes out)."""
        if changes:
            with self._lock:
                self._changes.extend(changes)

    def _call_soon(self, event: asyncio.Event | None) -> None:
        loop = self._loop
        if loop is None or event is None:
            return
        with contextlib.suppress(RuntimeError):  # loop already closed
            loop.call_soon_threadsafe(event.set)

    def status(self) -> StreamStatus:
        """Counters for the self-metrics."""
        with self._lock:
            return StreamStatus(
                analyzer=self.target,
                connected=self._connected,
                sent=self._sent,
                dropped=self._dropped,
                buffered=len(self._buffer),
                reconnects=self._reconnects,
                acked=self._acked,
            )

    def _channel(self) -> grpc.aio.Channel:
        options: list[tuple[str, int | str]] = [
            ("grpc.keepalive_time_ms", self._config.keepalive_time_ms),
            ("grpc.keepalive_timeout_ms", self._config.keepalive_timeout_ms),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.initial_reconnect_backoff_ms", int(self._config.backoff_initial * 1000)),
            ("grpc.max_reconnect_backoff_ms", int(self._config.backoff_max * 1000)),
        ]
        if self._config.tls_server_name:
            options.append(("grpc.ssl_target_name_override", self._config.tls_server_name))
        credentials = self._tls.credentials()
        if credentials is not None:
            return grpc.aio.secure_channel(self.target, credentials, options=options)
        return grpc.aio.insecure_channel(self.target, options=options)

    def _take_batch(self, inflight: dict[int, list[pb.Sample]], sequence: int) -> pb.SampleBatch | None:
        with self._lock:
            if not self._buffer:
                return None
            samples = [self._buffer.popleft() for _ in range(min(len(self._buffer), self._config.batch_max))]
            dropped, self._dropped_unreported = self._dropped_unreported, 0
            inflight[sequence] = samples
            changes = list(self._changes)
            self._changes.clear()
            packed = self._packed
        return pb.SampleBatch(
            collector=self._collector_id,
            collector_version=__version__,
            sequence=sequence,
            samples=samples if packed else [unpacked(s) for s in samples],
            dropped_since_last=dropped,
            guard_actions=changes,
        )

    async def _writer(
        self, call: grpc.aio.StreamStreamCall[pb.SampleBatch, pb.Control], inflight: dict[int, list[pb.Sample]]
    ) -> None:
        assert self._wake is not None
        assert self._stopping is not None
        assert self._urgent is not None
        sequence = 0
        while True:
            self._wake.clear()
            self._idle = True  # before the take: a sample published after it must wake us
            batch = self._take_batch(inflight, sequence + 1)
            if batch is None:
                if self._stopping.is_set():
                    return  # everything buffered went out before the stop
                await self._wake.wait()
                continue
            self._idle = False
            sequence += 1
            await call.write(batch)
            self._flushing = True  # before looking at the buffer: a later urgent publish wakes us
            self._urgent.clear()
            if self._config.flush_interval > 0 and not self._buffer and not self._stopping.is_set():
                # Caught up: let samples gather. Each message wakes the gRPC core's threads many times,
                # more CPU than taking the sample (docs/benchmarks.md, "Collector": flush 0 against
                # flush 5 s); the first sample still goes at once.
                # A stop, or a sample with a signal past the analyzer's SendEarly value, ends the wait.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._urgent.wait(), self._config.flush_interval)
            self._flushing = False

    async def _reader(
        self, call: grpc.aio.StreamStreamCall[pb.SampleBatch, pb.Control], inflight: dict[int, list[pb.Sample]]
    ) -> bool:
        acked = False
        async for control in call:
            if self._handle(control, inflight) and not acked:
                acked = True
                self._once.clear("down")
                log.info("streaming to analyzer %s", self.target, extra={"analyzer": self.target})
        return acked

    def _handle(self, control: pb.Control, inflight: dict[int, list[pb.Sample]]) -> bool:
        which = control.WhichOneof("kind")
        if which == "ack":
            with self._lock:
                for sequence in [s for s in inflight if s <= control.ack.sequence]:
                    self._sent += len(inflight.pop(sequence))
                if not inflight and self._acked_all is not None:
                    self._acked_all.set()
                self._acked += control.ack.accepted
                self._connected = True
            if control.ack.rejected and self._once.first(f"rejected:{list(control.ack.reject_reasons)}"):
                log.warning(
                    "analyzer %s rejected samples: %s",
                    self.target,
                    "; ".join(control.ack.reject_reasons),
                    extra={"analyzer": self.target},
                )
            return True
        if which == "set_interval" and self._on_set_interval is not None and control.set_interval.interval_ms > 0:
            self._on_set_interval(control.set_interval.interval_ms / 1000.0)
        elif which == "send_early":
            above = {k: v for k, v in control.send_early.above.items() if math.isfinite(v)}
            with self._lock:
                self._above = above
            log.debug("analyzer %s: send at once above %s", self.target, above, extra={"analyzer": self.target})
        elif which == "features":
            with self._lock:
                self._packed = control.features.packed_values
        elif which in ("guard_rules", "workloads") and self._on_guard is not None:
            self._on_guard(control)
        return False

    def _requeue(self, inflight: dict[int, list[pb.Sample]]) -> None:
        """Put samples the analyzer never acknowledged back at the front (oldest dropped past the bound)."""
        with self._lock:
            unacked = [sample for sequence in sorted(inflight) for sample in inflight[sequence]]
            inflight.clear()
            self._buffer.extendleft(reversed(unacked))
            while len(self._buffer) > self._config.buffer_samples:
                self._buffer.popleft()
                self._dropped += 1
                self._dropped_unreported += 1

    def _thread_main(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._wake, self._stopping, self._urgent = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self._loop = asyncio.get_running_loop()
        if self._stop.is_set():
            return
        attempt = 0
        first = True
        while not self._stop.is_set():
            if not first:
                with self._lock:
                    self._reconnects += 1
            first = False
            acked = await self._stream_once()
            with self._lock:
                self._connected = False
            if self._stop.is_set():
                break
            attempt = 0 if acked else attempt + 1
            delay = min(self._config.backoff_max, self._config.backoff_initial * (2 ** min(attempt, 30)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._rng.uniform(delay / 2, delay))
        self._loop = None

    async def _until_stopped_or(self, awaitable: Awaitable[Any], limit: float | None) -> bool:
        """Run ``awaitable``; False when stopped or timed out first."""
        assert self._stopping is not None
        task = asyncio.ensure_future(awaitable)
        stopper = asyncio.ensure_future(self._stopping.wait())
        done, _ = await asyncio.wait({task, stopper}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        for pending in (task, stopper):
            pending.cancel()
        await asyncio.gather(task, stopper, return_exceptions=True)
        return task in done and not task.cancelled() and task.exception() is None

    def _log_down(self, problem: str) -> None:
        if not self._stop.is_set() and self._once.first("down"):
            log.warning(
                "stream to analyzer %s: %s; reconnecting with backoff",
                self.target,
                problem,
                extra={"analyzer": self.target},
            )

    async def _stream_once(self) -> bool:
        """One stream until it fails or we stop; True when the analyzer acknowledged something."""
        assert self._stopping is not None
        inflight: dict[int, list[pb.Sample]] = {}
        with self._lock:
            self._packed = False  # until this analyzer says otherwise (it may be an older one)
        try:
            call_metadata = metadata(self._config)
        except ConfigError as exc:
            if self._once.first(f"config:{exc}"):
                log.error("stream to %s: %s", self.target, exc, extra={"analyzer": self.target})
            return False
        channel = self._channel()
        try:
            if not await self._until_stopped_or(channel.channel_ready(), max(1.0, self._config.backoff_max)):
                self._log_down("unreachable")
                return False
            stub = pb_grpc.AnalyzerStub(channel)
            # grpc-stubs want a request iterator; grpc.aio also allows none and call.write() per message.
            call: grpc.aio.StreamStreamCall[pb.SampleBatch, pb.Control] = stub.StreamSamples(metadata=call_metadata)  # type: ignore[call-arg]
            reader = asyncio.ensure_future(self._reader(call, inflight))
            writer = asyncio.ensure_future(self._writer(call, inflight))
            stopper = asyncio.ensure_future(self._stopping.wait())
            await asyncio.wait({reader, writer, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if stopper.done() and not reader.done():
                await self._last_flush(reader, writer, inflight)
            call.cancel()
            for task in (reader, writer, stopper):
                task.cancel()
            results = await asyncio.gather(reader, writer, stopper, return_exceptions=True)
            errors = [r for r in results if isinstance(r, grpc.RpcError)]
            if errors:
                error = errors[0]
                code = error.code() if isinstance(error, grpc.aio.AioRpcError) else None
                details = error.details() if isinstance(error, grpc.aio.AioRpcError) else str(error)
                self._log_down(f"failed ({code.name if code else '?'}: {details})")
            elif not self._stop.is_set():
                self._log_down("the analyzer ended the stream")
            return results[0] is True
        finally:
            self._requeue(inflight)
            await channel.close(None)

    async def _last_flush(
        self, reader: asyncio.Future[Any], writer: asyncio.Future[Any], inflight: dict[int, list[pb.Sample]]
    ) -> None:
        """On stop: let the writer send what gathered and the analyzer acknowledge it (bounded)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LAST_FLUSH_S
        await asyncio.wait({writer, reader}, timeout=LAST_FLUSH_S, return_when=asyncio.FIRST_COMPLETED)
        if inflight and not reader.done():
            acked = self._acked_all = asyncio.Event()
            waiter: asyncio.Future[Any] = asyncio.ensure_future(acked.wait())
            left = max(0.0, deadline - loop.time())
            await asyncio.wait({waiter, reader}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()

    def close(self, timeout: float = 5.0) -> None:
        """Send what the buffer holds (for up to a second), then stop the loop and close the channel."""
        self._stop.set()
        self._call_soon(self._stopping)
        self._call_soon(self._wake)
        self._call_soon(self._urgent)
        if self._thread.is_alive():
            self._thread.join(timeout)


class StreamFanout:
    """The streams to every configured analyzer."""

    def __init__(
        self,
        config: StreamSettings,
        *,
        collector_id: str,
        on_set_interval: Callable[[float], None] | None = None,
        on_guard: Callable[[pb.Control], None] | None = None,
        guard_changes: Callable[[], list[GuardChange]] | None = None,
    ) -> None:
        self.streams: Sequence[AnalyzerStream] = [
            AnalyzerStream(
                target, config, collector_id=collector_id, on_set_interval=on_set_interval, on_guard=on_guard
            )
            for target in dict.fromkeys(config.analyzers)
        ]
        self._guard_changes = guard_changes

    def start(self) -> None:
        """Start every stream."""
        for stream in self.streams:
            stream.start()

    def publish(self, sample: NodeSample) -> None:
        """Send ``sample`` to every analyzer."""
        message = sample_to_proto(sample)
        values = {r.name: r.value for r in sample.readings if r.value is not None and not r.device}
        # every replica hears of the guard's changes; only the leader posts their Events
        changes = [guard_change_to_proto(c) for c in self._guard_changes()] if self._guard_changes else []
        for stream in self.streams:
            stream.add_changes(changes)
            stream.publish(message, values)

    def statuses(self) -> list[StreamStatus]:
        """Self-metric counters of every stream."""
        return [s.status() for s in self.streams]

    def close(self) -> None:
        """Close every stream."""
        for stream in self.streams:
            stream.close()


def apply_guard_control(guard: NodeGuard, control: pb.Control) -> None:
    """What an analyzer sends the guard: its rules (hot-reloaded with the detection rules), or
    the node's pods with their class. Anything invalid is logged and changes nothing."""
    which = control.WhichOneof("kind")
    if which == "guard_rules":
        try:
            guard.set_rules(guard_rules_from_proto(control.guard_rules))
        except ConfigError as exc:
            log.error("the analyzer sent guard rules that are not valid, keeping the ones in force: %s", exc)
    elif which == "workloads":
        if control.workloads.node != guard.node:
            log.warning("the analyzer sent pods of node %r to node %r; ignored", control.workloads.node[:253],
                        guard.node)  # fmt: skip
            return
        pods, problems = workloads_from_proto(control.workloads)
        if problems:
            log.warning("pods the guard cannot place, left out: %s", "; ".join(problems[:5]))
        guard.groups.set_pods(pods)
