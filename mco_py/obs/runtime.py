"""Metrics every MCO process exposes beside its own: ``process_*`` and ``mco_build_info``.

``process_*`` are prometheus_client's (CPU seconds, resident and virtual memory, open and
maximum file descriptors, start time: from /proc/self), so dashboards and alerts written for
any Prometheus-instrumented process work on MCO's too.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mco_py import __version__

_BUILD_HELP = "The MCO version and Python this process runs (1)"


class RuntimeMetrics(Collector):
    """``process_*`` of this process (prometheus_client's :class:`ProcessCollector`) and
    ``mco_build_info{component,version,python} 1``.

    ``proc_root`` is where this process's ``self/`` is read (tests give a frozen tree);
    a collector's ``--proc-root`` (the host's signals) does not move it.
    """

    def __init__(self, component: str, registry: CollectorRegistry, *, proc_root: str = "/proc") -> None:
        self._process = ProcessCollector(proc=proc_root, registry=None)
        self._build = (component, __version__, platform.python_version())
        registry.register(self)

    def collect(self) -> Iterable[Metric]:
        yield from self._process.collect()
        info = GaugeMetricFamily("mco_build_info", _BUILD_HELP, labels=["component", "version", "python"])
        info.add_metric(list(self._build), 1.0)
        yield info
