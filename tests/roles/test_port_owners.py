"""mco_port_owners names the process listening on a port from /proc (the preflight's port check)."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.roles.helpers import load_module

ports = load_module("plugins/modules/mco_port_owners.py", "mco_port_owners")


def test_a_listener_is_named_and_a_free_port_is_empty() -> None:
    comm = Path("/proc/self/comm").read_text().strip()
    with socket.socket() as listener, socket.socket() as unused:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        unused.bind(("127.0.0.1", 0))  # bound, not listening: the port counts as free
        held, free = listener.getsockname()[1], unused.getsockname()[1]
        assert ports.owners(Path("/proc"), [held, free]) == {str(held): [comm], str(free): []}


def test_ipv6_listeners_are_seen() -> None:
    with socket.socket(socket.AF_INET6) as listener:
        listener.bind(("::1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert ports.owners(Path("/proc"), [port])[str(port)] != []
