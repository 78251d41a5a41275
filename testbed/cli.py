"""``python -m testbed``: bring booted test nodes up and down, reach them, clean up.

Every command takes ``--bed NAME`` (default ``$MCO_TESTBED_BED`` or ``dev``); nodes of
one bed share a controller namespace and can reach one another.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from testbed import image, nodes, system, vm
from testbed.errors import TestbedError


def _node_options(args: argparse.Namespace) -> nodes.NodeOptions:
    caps: list[str] = []
    for chunk in args.caps or []:
        caps.extend(c.strip().upper() for c in chunk.split(",") if c.strip())
    return nodes.NodeOptions(
        kvm=args.kvm,
        capabilities=tuple(nodes.check_capabilities(caps)),
        binds=tuple(nodes.check_binds(args.bind or [])),
        kube=args.kube,
    )


def cmd_image(args: argparse.Namespace) -> int:
    path = image.ensure_image(rebuild=args.rebuild)
    print(path)
    if args.prune:
        for old in image.prune_images(keep=path):
            print(f"removed old image {old}")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    bed = nodes.Bed(args.bed)
    options = _node_options(args)
    for name in args.names:
        nodes.check_node_name(name)
    if args.address and len(args.names) > 1:
        raise TestbedError("--address applies to one node; bring nodes up one by one to choose addresses")
    root = image.ensure_image()
    for name in args.names:
        started = time.monotonic()
        already = bed.is_running(name)
        state = bed.up(name, image=root, options=options, address=args.address, ready_timeout=args.timeout)
        if already:
            print(f"{name}: already up at {state.address} (bed {bed.name}, pid {state.pid})")
            continue
        print(f"{name}: up at {state.address} in {time.monotonic() - started:.1f} s (bed {bed.name}, pid {state.pid})")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    bed = nodes.Bed(args.bed)
    for name in args.names:
        bed.down(nodes.check_node_name(name))
        print(f"{name}: down")
    return 0


def cmd_down_all(args: argparse.Namespace) -> int:
    beds = nodes.all_beds() if args.every_bed else [nodes.Bed(args.bed).name]
    for name in beds:
        removed = nodes.Bed(name).down_all()
        print(f"bed {name}: removed {', '.join(removed) if removed else 'no nodes'} and its controller namespace")
    left = nodes.leftovers()
    if args.every_bed and any(left.values()):
        raise TestbedError(f"leftovers remain after down-all: {json.dumps(left)}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    bed = nodes.Bed(args.bed)
    rows = bed.status()
    if args.json:
        print(json.dumps({"bed": bed.name, "nodes": rows, "leftovers": nodes.leftovers()}, indent=2))
        return 0
    if not rows:
        print(f"bed {bed.name}: no nodes")
    for row in rows:
        health = "running" if row["running"] else "NOT running"
        print(
            f"{row['node']:<20} {row['address'] or '-':<14} {health:<12} netns={row['netns']} mounted={row['mounted']}"
        )
    return 0


def cmd_ssh(args: argparse.Namespace) -> int:
    bed = nodes.Bed(args.bed)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    argv = bed.ssh_argv(nodes.check_node_name(args.name), command, tty=not command and sys.stdin.isatty())
    os.execvp(argv[0], argv)  # noqa: S606 -- replaces this process with a fixed argv, no shell


def cmd_exec_ctl(args: argparse.Namespace) -> int:
    bed = nodes.Bed(args.bed)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise TestbedError("exec-ctl needs a command: python -m testbed exec-ctl -- CMD ARGS...")
    system.preflight()
    with bed.locked():
        bed.ensure_controller()
    argv = ["ip", "netns", "exec", bed.ctl_netns, *command]
    os.execvp(argv[0], argv)  # noqa: S606 -- replaces this process with a fixed argv, no shell


def cmd_serve_ctl(args: argparse.Namespace) -> int:
    bed = nodes.Bed(args.bed)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise TestbedError("serve-ctl needs a command: python -m testbed serve-ctl --name NAME -- CMD ARGS...")
    pid = bed.serve(args.name, command, wait_port=args.wait_port, timeout=args.timeout)
    where = f" on {nodes.CONTROLLER_ADDRESS}:{args.wait_port}" if args.wait_port else ""
    print(f"{args.name}: running{where} in {bed.ctl_netns} (pid {pid}, log {bed.dir / (args.name + '.log')})")
    return 0


def cmd_forward_ctl(args: argparse.Namespace) -> int:
    bed = nodes.Bed(args.bed)
    host_port = bed.forward(args.port)
    print(f"127.0.0.1:{host_port} -> {nodes.CONTROLLER_ADDRESS}:{args.port} in {bed.ctl_netns}")
    return 0


def render_inventory(bed: nodes.Bed, groups: Sequence[str]) -> dict[str, object]:
    """Ansible inventory (YAML structure) for the bed's nodes; ``groups`` are ``GROUP=NODE,NODE``."""
    hosts: dict[str, dict[str, object]] = {}
    for node in bed.known_nodes():
        state = bed.load(node)
        if state is not None:
            hosts[node] = {"ansible_host": state.address}
    children: dict[str, object] = {}
    for spec in groups:
        group, _, members = spec.partition("=")
        names = [m for m in members.split(",") if m]
        if not group or not names:
            raise TestbedError(f"--group {spec!r} is invalid: use GROUP=NODE[,NODE...]")
        unknown = [n for n in names if n not in hosts]
        if unknown:
            raise TestbedError(f"--group {spec!r} names nodes that are not up: {', '.join(unknown)}")
        children[group] = {"hosts": {n: {} for n in names}}
    ssh_args = " ".join(
        f'-o {key}="{value}"' if " " in value else f"-o {key}={value}" for key, value in bed.ssh_config()
    )
    return {
        "all": {
            "children": {"mco_testbed": {"hosts": hosts}, **children},
            "vars": {
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(bed.ssh_key),
                "ansible_ssh_common_args": ssh_args,
                # a master connection per bed: another bed's node has the same address
                "ansible_control_path": f"%(directory)s/{bed.name}-%%h-%%r",
                "ansible_python_interpreter": "/usr/bin/python3",
            },
        }
    }


def cmd_inventory(args: argparse.Namespace) -> int:
    text = yaml.safe_dump(render_inventory(nodes.Bed(args.bed), args.group or []), sort_keys=False)
    if args.write:
        Path(args.write).write_text(text)
    else:
        print(text, end="")
    return 0


def cmd_vm_build(args: argparse.Namespace) -> int:
    node = vm.ensure_node(rebuild=args.rebuild)
    print(node.directory)
    print((node.directory / "node.json").read_text(), end="")
    return 0


def cmd_vm_run(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise TestbedError("vm run needs a command: python -m testbed vm run -- CMD ARGS...")
    files = {}
    for spec in args.file or []:
        guest, sep, host = spec.partition("=")
        if not sep or not Path(host).exists():
            raise TestbedError(f"--file {spec!r}: use GUEST=HOST with an existing HOST path")
        files[guest] = Path(host)
    payload = vm.Payload(command=tuple(command), files=files, python_packages=tuple(args.python or ()))
    outcome = vm.run(vm.ensure_node(), payload, timeout=args.timeout, cpus=args.cpus, memory_mib=args.memory)
    print(outcome.console, end="")
    print(
        f"testbed: guest exit {outcome.exit}, user space at {outcome.boot_seconds} s,"
        f" {outcome.wall_seconds:.1f} s in all",
        file=sys.stderr,
    )
    return 0 if outcome.exit == "0" else 1


def add_vm_commands(parser: argparse.ArgumentParser) -> None:
    """``vm build`` and ``vm run`` under ``parser``."""
    sub = parser.add_subparsers(dest="vm_command", required=True)
    p = sub.add_parser("build", help="build the node if its inputs changed; print its directory and inputs")
    p.add_argument("--rebuild", action="store_true", help="build even when the node exists")
    p.set_defaults(func=cmd_vm_build)
    p = sub.add_parser("run", help="boot the node, run a command in it, print the console: run [options] -- CMD...")
    p.add_argument("--file", action="append", metavar="GUEST=HOST", help="copy HOST to /mnt/GUEST (repeatable)")
    p.add_argument("--python", action="append", metavar="PACKAGE", help="a host package for /mnt/python (repeatable)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before QEMU is killed")
    p.add_argument("--cpus", type=int, default=2)
    p.add_argument("--memory", type=int, default=1024, metavar="MIB")
    p.add_argument("command", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_vm_run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m testbed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bed", default=None, help="bed name (default $MCO_TESTBED_BED or 'dev')")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("image", help="build the node image if its inputs changed; print its path")
    p.add_argument("--rebuild", action="store_true", help="build even when the image exists")
    p.add_argument("--prune", action="store_true", help="remove older images no running node uses")
    p.set_defaults(func=cmd_image)

    p = sub.add_parser("up", help="boot nodes and wait until ssh works and systemd is running")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("--kvm", action="store_true", help="bind /dev/kvm into the node")
    p.add_argument("--caps", action="append", metavar="CAP[,CAP]", help="extra capabilities, e.g. CAP_BPF,CAP_PERFMON")
    p.add_argument("--bind", action="append", metavar="SRC[:DST]", help="bind-mount a host path into the node")
    p.add_argument(
        "--kube", action="store_true", help="ready for a kubelet: own cgroups and PSI, CAP_SYS_ADMIN, containerd store"
    )
    p.add_argument("--address", help=f"node address in {nodes.SUBNET} (default: first free from .10)")
    p.add_argument("--timeout", type=float, default=nodes.DEFAULT_READY_TIMEOUT, help="seconds to wait for readiness")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("down", help="stop nodes and remove their mounts, namespaces and state")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.set_defaults(func=cmd_down)

    p = sub.add_parser("down-all", help="remove every node and the controller namespace of the bed")
    p.add_argument("--every-bed", action="store_true", help="every bed on this host (all mcotb-* leftovers)")
    p.set_defaults(func=cmd_down_all)

    p = sub.add_parser("status", help="list the bed's nodes")
    p.add_argument("--json", action="store_true", help="also list leftovers of every bed")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("ssh", help="ssh into a node: ssh NAME [-- CMD ARGS...]")
    p.add_argument("name", metavar="NAME")
    p.add_argument("command", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_ssh)

    p = sub.add_parser(
        "exec-ctl", help=f"run a command in the controller namespace (address {nodes.CONTROLLER_ADDRESS})"
    )
    p.add_argument("command", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_exec_ctl)

    p = sub.add_parser("serve-ctl", help="start a background service in the controller namespace (stopped by down-all)")
    p.add_argument("--name", required=True, help="service name (log: <bed dir>/NAME.log)")
    p.add_argument("--wait-port", type=int, help=f"return once {nodes.CONTROLLER_ADDRESS}:PORT accepts connections")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for --wait-port")
    p.add_argument("command", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_serve_ctl)

    p = sub.add_parser("forward-ctl", help="reach a controller-namespace port from the host (prints 127.0.0.1:PORT)")
    p.add_argument("port", type=int, help=f"port on {nodes.CONTROLLER_ADDRESS}")
    p.set_defaults(func=cmd_forward_ctl)

    p = sub.add_parser("inventory", help="print (or --write) an Ansible inventory for the bed's nodes")
    p.add_argument("--group", action="append", metavar="GROUP=NODE[,NODE]", help="add a group (repeatable)")
    p.add_argument("--write", metavar="PATH", help="write to PATH instead of stdout")
    p.set_defaults(func=cmd_inventory)

    add_vm_commands(
        sub.add_parser("vm", help="the QEMU (TCG) test node with its own kernel and pure cgroup v2 (docs/vm-node.md)")
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.verbose:  # otherwise warnings reach stderr through logging's last-resort handler
        logging.basicConfig(level=logging.INFO, format="testbed: %(message)s")
    try:
        result: int = args.func(args)
    except TestbedError as exc:
        print(f"testbed: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("testbed: interrupted; `python -m testbed down-all` removes what was left", file=sys.stderr)
        return 130
    return result
