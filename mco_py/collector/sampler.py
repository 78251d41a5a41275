"""Opens the sources once, takes samples, and runs the sample loop."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from mco_py.collector.biolatency import BioConfig, BioLatencySource
from mco_py.collector.cgroups import WorkloadPressureSource
from mco_py.collector.cpustat import OomSource, StealSource
from mco_py.collector.exporter import CollectorMetrics
from mco_py.collector.guard.files import detect_layout
from mco_py.collector.perf import LlcSource
from mco_py.collector.psi import PsiSource
from mco_py.collector.resctrl import ResctrlSource
from mco_py.collector.signals import Absence, NodeSample, Reading, Total, Unavailable
from mco_py.collector.source import ProblemLog, Source
from mco_py.collector.workload_groups import WorkloadGroups, detect_driver
from mco_py.config.collector import MAX_INTERVAL_S, MIN_INTERVAL_S, CollectorSettings
from mco_py.errors import ConfigError
from mco_py.obs.logging import OnceFilter

log = logging.getLogger(__name__)


def open_sources(
    settings: CollectorSettings, *, problems: ProblemLog | None = None, groups: WorkloadGroups | None = None
) -> list[Source]:
    """Every source, each probing its backends once (the per-class pressure one with ``groups``)."""
    problems = problems or ProblemLog(log, OnceFilter())
    sources: list[Source] = [
        PsiSource(settings.proc_root, problems=problems),
        LlcSource(settings.sys_root, enabled=settings.llc != "off", problems=problems),
        BioLatencySource(
            BioConfig(backend=settings.bio_backend, min_events=settings.bio_min_events, bpf_dir=settings.bpf_dir),
            proc_root=settings.proc_root,
            sys_root=settings.sys_root,
            tracefs_root=settings.tracefs_root,
            problems=problems,
        ),
        StealSource(settings.proc_root, problems=problems),
        OomSource(settings.proc_root, problems=problems),
    ]
    if groups is not None:
        sources.append(_workload_source(settings, groups))
    if settings.resctrl != "off":
        sources.append(ResctrlSource(settings.proc_root, settings.sys_root, problems=problems))
    return sources


class Sampler:
    """Reads every source; one source's failure never stops the others."""

    def __init__(
        self,
        sources: Sequence[Source],
        *,
        node: str,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.sources = list(sources)
        self.node = node
        self._clock = clock
        self._wall = wall
        self._once = OnceFilter()
        self._last: float | None = None

    @property
    def backends(self) -> dict[str, str]:
        """Backend in use per signal group."""
        return {s.group: s.backend for s in self.sources}

    def sample(self) -> NodeSample:
        """One sample covering the time since the previous one."""
        now = self._clock()
        readings: list[Reading] = []
        totals: list[Total] = []
        for source in self.sources:
            try:
                readings.extend(source.read(now))
                totals.extend(source.totals())
            except Unavailable as exc:
                readings.append(Reading.absent(source.group, source.backend, exc.kind, exc.reason))
            except Exception as exc:
                if self._once.first(f"{source.group}:{type(exc).__name__}"):
                    log.exception("source %s failed", source.group, extra={"signal": source.group})
                readings.append(
                    Reading.absent(source.group, source.backend, Absence.READ_ERROR, f"internal error: {exc!r}")
                )
        interval = now - self._last if self._last is not None else 0.0
        self._last = now
        return NodeSample(
            node=self.node,
            timestamp=self._wall(),
            interval=interval,
            readings=tuple(readings),
            backends=self.backends,
            totals=tuple(totals),
        )

    def close(self) -> None:
        """Close every source (detaches BPF, removes the tracefs instance, closes perf fds)."""
        for source in self.sources:
            try:
                source.close()
            except Exception:
                log.exception("closing source %s failed", source.group)


class SampleLoop:
    """Samples every interval until stopped; publishes to the exporter and the streams."""

    def __init__(
        self,
        sampler: Sampler,
        *,
        interval_s: float,
        metrics: CollectorMetrics | None = None,
        publish: Callable[[NodeSample], None] | None = None,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sampler = sampler
        self._interval = interval_s
        self.metrics = metrics
        """Where each sample's self-metrics and signal series go."""
        self.publish = publish
        """Where each sample is sent (the analyzer streams)."""
        self.stop = stop or threading.Event()
        self._clock = clock

    def set_interval(self, seconds: float) -> None:
        """Change the interval (an analyzer's SetInterval), clamped to the allowed range."""
        clamped = min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, seconds))
        if clamped != self._interval:
            log.info("sample interval set to %.3f s", clamped, extra={"interval_s": clamped})
        self._interval = clamped

    def run(self) -> None:
        """Loop until :attr:`stop` is set; the first sample primes the rates."""
        deadline = self._clock()
        while not self.stop.is_set():
            started = self._clock()
            sample = self._sampler.sample()
            if self.metrics is not None:
                self.metrics.sample_duration.observe(self._clock() - started)
                self.metrics.samples_taken.inc()
                self.metrics.samples.update(sample)
            if self.publish is not None and sample.interval > 0:
                self.publish(sample)
            deadline += self._interval
            delay = deadline - self._clock()
            if delay < 0:  # fell behind (suspend, slow source): start afresh
                deadline = self._clock()
                delay = 0
            self.stop.wait(delay)


def workload_groups(settings: CollectorSettings) -> WorkloadGroups | None:
    """The node's workload classes (configured groups; pods once the analyzer names them), or
    None when neither classes nor the guard are configured. Raises ConfigError for nested
    online and offline groups."""
    if not (settings.online_cgroups or settings.offline_cgroups or settings.guard.mode != "off"):
        return None
    try:
        driver = detect_driver(detect_layout(settings.cgroup_root).cpu_root, settings.kubelet_cgroup_driver)
    except ConfigError:
        if settings.kubelet_cgroup_driver != "auto":
            raise
        driver = None  # no cgroup tree to find: the workload source says why
    return WorkloadGroups(settings.online_cgroups, settings.offline_cgroups, driver=driver)


def _workload_source(settings: CollectorSettings, groups: WorkloadGroups) -> Source:
    """Pressure per workload class, or absent readings saying why the tree cannot be read."""
    try:
        layout = detect_layout(settings.cgroup_root)
    except ConfigError as exc:
        return WorkloadPressureSource(None, groups, problem=str(exc))
    return WorkloadPressureSource(layout, groups)
