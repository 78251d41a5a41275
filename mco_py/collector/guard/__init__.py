"""The node guard: limits the offline cgroups while the online ones stall (docs/collector.md).

- :mod:`.loop`: the control loop (:class:`~.loop.NodeGuard`, run by :class:`~.loop.GuardLoop`);
- :mod:`.knobs`: what to write to limit CPU, memory and I/O;
- :mod:`.writer`: the one writer of cgroup files, journalled first, and the restore;
- :mod:`.journal`: what the files said before the guard changed them, on disk;
- :mod:`.files`: the table of cgroup files, v1 and v2, and the layout found by it;
- :mod:`.metrics`: the guard's status and metric families.
"""
