"""Test-bed parts that need no root: names, addresses, inventory, package list, mirror, mounts."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from testbed import cli, image, nodes, system
from testbed.errors import TestbedError


@pytest.fixture
def bed(tmp_path: Path) -> nodes.Bed:
    return nodes.Bed("unit", root=tmp_path)


def _record(bed: nodes.Bed, name: str, address: str) -> None:
    bed.save(
        nodes.NodeState(
            name=name, bed=bed.name, address=address, netns=bed.node_netns(name), root="/nonexistent", image="/img"
        )
    )


@pytest.mark.parametrize("name", ["", "A", "a-b", "x" * 21, "dev/../x"])
def test_bad_bed_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(TestbedError, match="lower-case letters and digits"):
        nodes.check_bed_name(name)


@pytest.mark.parametrize("name", ["", "ctl", "Node", "1node", "node_a", "n" * 32])
def test_bad_node_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(TestbedError, match="start with a letter"):
        nodes.check_node_name(name)


def test_names_derive_from_bed_and_node(bed: nodes.Bed, tmp_path: Path) -> None:
    assert bed.ctl_netns == "mcotb-unit-ctl"
    assert bed.node_netns("node-a") == "mcotb-unit-node-a"
    assert bed.node_dir("node-a") == tmp_path / "unit" / "nodes" / "node-a"
    assert bed.ssh_key == tmp_path / "id_ed25519"


def test_addresses_are_allocated_from_dot_ten_and_never_twice(bed: nodes.Bed) -> None:
    assert bed.allocate_address(None) == "10.213.0.10"
    _record(bed, "node-a", "10.213.0.10")
    _record(bed, "node-b", "10.213.0.12")
    assert bed.allocate_address(None) == "10.213.0.11"
    assert bed.allocate_address("10.213.0.20") == "10.213.0.20"
    with pytest.raises(TestbedError, match="taken by another node"):
        bed.allocate_address("10.213.0.12")


@pytest.mark.parametrize(
    ("wanted", "message"),
    [("10.213.0.1", "from .10"), ("10.9.0.10", "must be in 10.213.0.0/24"), ("banana", "not an IPv4 address")],
)
def test_bad_addresses_are_refused(bed: nodes.Bed, wanted: str, message: str) -> None:
    with pytest.raises(TestbedError, match=message):
        bed.allocate_address(wanted)


def test_state_round_trips_and_a_corrupt_file_reads_as_absent(bed: nodes.Bed) -> None:
    _record(bed, "node-a", "10.213.0.10")
    loaded = bed.load("node-a")
    assert loaded is not None
    assert loaded.address == "10.213.0.10"
    (bed.node_dir("node-a") / "state.json").write_text("{not json")
    assert bed.load("node-a") is None
    assert bed.known_nodes() == ["node-a"]


def test_node_options_become_nspawn_flags(tmp_path: Path) -> None:
    options = nodes.NodeOptions(capabilities=("CAP_BPF", "CAP_PERFMON"), binds=(f"{tmp_path}:/mnt/x",))
    assert options.nspawn_args() == ["--capability=CAP_BPF,CAP_PERFMON", f"--bind={tmp_path}:/mnt/x"]
    with pytest.raises(TestbedError, match="CAP_BPF"):
        nodes.check_capabilities(["bpf"])
    with pytest.raises(TestbedError, match="does not exist"):
        nodes.check_binds([str(tmp_path / "missing")])
    with pytest.raises(TestbedError, match="/host/path"):
        nodes.check_binds(["relative:/x"])


def test_inventory_reaches_nodes_through_the_controller_namespace(bed: nodes.Bed) -> None:
    _record(bed, "node-a", "10.213.0.10")
    _record(bed, "node-b", "10.213.0.11")
    inventory = yaml.safe_load(
        yaml.safe_dump(cli.render_inventory(bed, ["mco_control=node-a", "mco_nodes=node-a,node-b"]))
    )
    everything = inventory["all"]
    assert everything["children"]["mco_testbed"]["hosts"]["node-b"] == {"ansible_host": "10.213.0.11"}
    assert set(everything["children"]["mco_nodes"]["hosts"]) == {"node-a", "node-b"}
    ssh_args = shlex.split(everything["vars"]["ansible_ssh_common_args"])
    assert "ProxyCommand=ip netns exec mcotb-unit-ctl socat - TCP:%h:%p" in ssh_args
    assert everything["vars"]["ansible_ssh_private_key_file"] == str(bed.ssh_key)
    # another bed's node has the same address: the ssh master connection is this bed's own
    assert everything["vars"]["ansible_control_path"] % {"directory": "/cp"} == "/cp/unit-%h-%r"
    with pytest.raises(TestbedError, match="not up: node-z"):
        cli.render_inventory(bed, ["g=node-z"])
    with pytest.raises(TestbedError, match="GROUP=NODE"):
        cli.render_inventory(bed, ["justagroup"])


def test_cli_reports_bad_input_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--bed", "Bad-Bed", "status"]) == 1
    assert "lower-case letters and digits" in capsys.readouterr().err


def test_package_list_is_read_and_bad_lines_are_named(tmp_path: Path) -> None:
    shipped = image.read_packages()
    assert {"systemd", "openssh-server", "python3", "containerd"} <= set(shipped)
    bad = tmp_path / "packages.txt"
    bad.write_text("# comment\nsystemd\nnot a package\n")
    with pytest.raises(TestbedError, match=r"packages.txt:3: 'not a package'"):
        image.read_packages(bad)
    bad.write_text("# only comments\n")
    with pytest.raises(TestbedError, match="lists no packages"):
        image.read_packages(bad)


def test_image_path_changes_with_the_package_list_only(tmp_path: Path) -> None:
    first = tmp_path / "a.txt"
    first.write_text("systemd\npython3\n")
    reordered = tmp_path / "b.txt"
    reordered.write_text("# same set\npython3\nsystemd\n")
    more = tmp_path / "c.txt"
    more.write_text("systemd\npython3\nzstd\n")
    assert image.image_path(tmp_path, first) == image.image_path(tmp_path, reordered)
    assert image.image_path(tmp_path, first) != image.image_path(tmp_path, more)
    assert image.image_path(tmp_path, first).parent == tmp_path


def test_cache_root_is_outside_the_clone_and_follows_mco_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MCO_CACHE", str(tmp_path))
    assert image.cache_root() == tmp_path / "testbed"


def test_mirror_comes_from_the_host_apt_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCO_TESTBED_MIRROR", raising=False)
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "other.list").write_text("deb https://example.org/apt cloud-sdk-bookworm main\n")
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\nComponents: main\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n"
    )
    assert image.host_mirror(tmp_path) == "http://mirror.example/debian"
    (tmp_path / "sources.list.d" / "debian.sources").unlink()
    with pytest.raises(TestbedError, match="MCO_TESTBED_MIRROR"):  # no mirror's name is written into the repo
        image.host_mirror(tmp_path)
    monkeypatch.setenv("MCO_TESTBED_MIRROR", "http://override/debian")
    assert image.host_mirror(tmp_path) == "http://override/debian"


def test_the_mirror_is_the_hosts_debian_main_source_not_a_third_party_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """apt's rules: deb822 stanzas that are disabled or deb-src only do not count, nor do sources
    of other suites or without main; a third-party repository for bookworm (its path ending in
    /debian too) sorted first is not Debian's archive; apt's lists name Debian's own by Origin."""
    monkeypatch.delenv("MCO_TESTBED_MIRROR", raising=False)
    apt, lists = tmp_path / "apt", tmp_path / "lists"
    (apt / "sources.list.d").mkdir(parents=True)
    lists.mkdir()
    (apt / "sources.list.d" / "a-vendor.sources").write_text(
        "Types: deb\nURIs: https://vendor.example/linux/debian\nSuites: bookworm\nComponents: stable\n"
    )
    (apt / "sources.list.d" / "b-old.sources").write_text(
        "Types: deb\nURIs: http://old.example/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n\n"
        "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\nComponents: main\n"
    )
    (apt / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# a comment inside the stanza\nURIs: http://mirror.example/debian/\nSuites: bookworm\n"
        "  bookworm-updates\nComponents: main contrib\n"
    )
    assert image.host_mirror(apt, lists) == "http://mirror.example/debian"

    # a snapshot of the archive (its path does not end in /debian), known by its Release file
    snapshot = "http://snapshot.example/archive/debian/20250520T000000Z"
    (apt / "sources.list.d" / "debian.sources").unlink()
    (apt / "sources.list").write_text(
        "deb [ arch=amd64 signed-by=/usr/share/keyrings/vendor.gpg ] https://vendor.example/php/debian bookworm main\n"
        f"deb {snapshot} bookworm main\n"
    )
    (lists / "snapshot.example_archive_debian_20250520T000000Z_dists_bookworm_InRelease").write_text(
        "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nOrigin: Debian\nLabel: Debian\nSuite: stable\n"
    )
    (lists / "vendor.example_php_debian_dists_bookworm_InRelease").write_text("Origin: deb.vendor.example\n")
    assert image.host_mirror(apt, lists) == snapshot

    (apt / "sources.list").write_text(f"deb-src {snapshot} bookworm main\ndeb {snapshot} bookworm-updates main\n")
    with pytest.raises(TestbedError, match="no Debian bookworm main source in"):
        image.host_mirror(apt, lists)


def test_mounts_under_a_dir_are_listed_deepest_first_with_escapes(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "22 1 0:21 / / rw - ext4 /dev/vda rw\n"
        "30 22 0:30 / /run/mco-testbed/b/nodes/n1/root rw - overlay overlay rw\n"
        "31 30 0:31 / /run/mco-testbed/b/nodes/n1/root/proc rw - proc proc rw\n"
        "32 22 0:32 / /run/mco-testbed/b/with\\040space rw - tmpfs tmpfs rw\n"
        "33 22 0:33 / /run/mco-testbed/bb rw - tmpfs tmpfs rw\n"
    )
    found = system.mounts_under(Path("/run/mco-testbed/b"), mountinfo=mountinfo)
    assert found == [
        Path("/run/mco-testbed/b/nodes/n1/root/proc"),
        Path("/run/mco-testbed/b/nodes/n1/root"),
        Path("/run/mco-testbed/b/with space"),
    ]


def test_preflight_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system.os, "geteuid", lambda: 1000)
    with pytest.raises(TestbedError, match="need root"):
        system.preflight()
    monkeypatch.setattr(system.os, "geteuid", lambda: 0)
    monkeypatch.setattr(system.shutil, "which", lambda tool: None if tool == "socat" else f"/usr/bin/{tool}")
    with pytest.raises(TestbedError, match=r"missing tools: socat; run `make setup` as root"):
        system.preflight()


SHARED_INVENTORY = Path(__file__).resolve().parents[2] / "molecule" / "shared" / "inventory"


@pytest.mark.parametrize("scenario", ["mco-cluster", "kvm_check_booted", "kata_static_booted", "testbed-smoke"])
def test_the_booted_scenarios_connect_with_plain_values(scenario: str, tmp_path: Path) -> None:
    """Every connection variable of a booted scenario's nodes is a plain value (bed.py computes the
    bed's once per run): a Jinja one is templated again for every task on every host."""
    project = str(SHARED_INVENTORY.parents[2])
    env = {**os.environ, "MOLECULE_SCENARIO_NAME": scenario, "MOLECULE_PROJECT_DIRECTORY": project}
    env["MCO_TESTBED_STATE"] = str(tmp_path)
    argv = [str(Path(sys.executable).parent / "ansible-inventory"), "--list", "--export"]
    argv += ["-i", str(SHARED_INVENTORY.parents[1] / scenario / "inventory"), "-i", str(SHARED_INVENTORY)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    bed = "".join(c for c in scenario if c.isalnum() and c.islower())[:14]
    bed += hashlib.sha1(project.encode(), usedforsecurity=False).hexdigest()[:6]
    assert listed["all"]["vars"]["mco_testbed_bed"] == bed
    assert listed["all"]["vars"]["mco_pki_dir"] == f"{tmp_path}/{bed}/pki"
    nodes_ = listed["mco_testbed"]["hosts"]
    addresses = [listed["_meta"]["hostvars"][n]["ansible_host"] for n in nodes_]
    assert len(set(addresses)) == len(nodes_)
    assert all(a.startswith("10.213.0.") for a in addresses)
    shared = listed["mco_testbed"]["vars"]
    assert f"mcotb-{bed}-ctl" in shared["ansible_ssh_common_args"]
    assert shared["ansible_ssh_private_key_file"] == f"{tmp_path}/id_ed25519"
    for node in nodes_:
        connection = {**shared, **listed["_meta"]["hostvars"][node]}
        templated = {k: v for k, v in connection.items() if k.startswith("ansible_") and "{{" in str(v)}
        assert not templated, f"{scenario}/{node}: templated connection variables {templated}"


def test_bed_py_is_an_inventory_script() -> None:
    script = SHARED_INVENTORY / "bed.py"
    assert subprocess.run([str(script), "--host", "x"], capture_output=True, text=True, check=True).stdout == "{}"
    wrong = subprocess.run([str(script)], capture_output=True, text=True, check=False)
    assert wrong.returncode == 2
    assert "--list" in wrong.stderr
