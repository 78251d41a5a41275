"""The node guard: limits the offline cgroups while the online ones stall (docs/collector.md).

- :mod:`.loop`: the control loop (:class:`~.loop.NodeGuard`, run by :class:`~.loop.GuardLoop`);
- :mod:`.knobs`: what to write to limit memory and I/O.
"""
