"""Booted test nodes: systemd-nspawn containers on private network namespaces.

Test-only tooling (not part of the ``mco_py`` package). ``python -m testbed --help``
lists the commands; docs/testbed.md explains how to use them by hand and from molecule.
"""
