"""kvm_probe module: ioctls on the real /dev/kvm, fixture cpuinfo and /sys/module trees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.roles.helpers import adhoc_json, load_module

kvm_probe = load_module("plugins/modules/kvm_probe.py", "kvm_probe")
FIXTURES = Path(__file__).parent / "fixtures" / "kvm"
HAVE_KVM = os.path.exists("/dev/kvm") and os.geteuid() == 0


def _sys_module(tmp_path: Path, modules: dict[str, str | None]) -> Path:
    """A /sys/module tree: name -> nested parameter value (None = no parameters dir)."""
    root = tmp_path / "sys" / "module"
    for name, nested in modules.items():
        (root / name).mkdir(parents=True)
        if nested is not None:
            (root / name / "parameters").mkdir()
            (root / name / "parameters" / "nested").write_text(nested + "\n")
    return root


def test_missing_device_is_not_ready_and_names_the_path(tmp_path: Path) -> None:
    facts = kvm_probe.probe(device=str(tmp_path / "kvm"), cpuinfo=str(tmp_path / "none"))
    assert facts["ready"] is False
    assert str(tmp_path / "kvm") in facts["reason"]
    assert "does not exist" in facts["reason"]
    assert facts["kvm"]["present"] is False
    assert facts["cpu"]["readable"] is False


def test_a_device_that_is_not_kvm_is_not_ready() -> None:
    facts = kvm_probe.probe(device="/dev/null")
    assert facts["ready"] is False
    assert "KVM_GET_API_VERSION" in facts["reason"]
    assert facts["kvm"]["api_version"] is None


@pytest.mark.root
@pytest.mark.skipif(not HAVE_KVM, reason="needs root and /dev/kvm")
def test_real_dev_kvm_creates_a_vm_and_vcpu_and_closes_its_fds() -> None:
    before = set(os.listdir("/proc/self/fd"))
    facts = kvm_probe.probe(device="/dev/kvm")
    assert facts["ready"] is True, facts["reason"]
    assert facts["kvm"]["api_version"] == 12
    assert facts["kvm"]["vm_created"] is True
    assert facts["kvm"]["vcpu_created"] is True
    assert set(os.listdir("/proc/self/fd")) == before


@pytest.mark.root
@pytest.mark.skipif(not HAVE_KVM, reason="needs root and /dev/kvm")
def test_api_version_only_mode_skips_vm_creation() -> None:
    facts = kvm_probe.probe(device="/dev/kvm", create_vm=False)
    assert facts["ready"] is True
    assert facts["kvm"]["vm_created"] is False


@pytest.mark.parametrize(
    ("fixture", "vendor", "vmx", "svm", "hypervisor"),
    [
        ("cpuinfo-paravirt-intel", "GenuineIntel", False, False, True),
        ("cpuinfo-intel-vmx", "GenuineIntel", True, False, False),
        ("cpuinfo-amd-svm", "AuthenticAMD", False, True, False),
    ],
)
def test_cpu_flags_and_vendor(fixture: str, vendor: str, vmx: bool, svm: bool, hypervisor: bool) -> None:
    cpu = kvm_probe.probe_cpu(str(FIXTURES / fixture))
    assert cpu["vendor"] == vendor
    assert (cpu["vmx"], cpu["svm"], cpu["hypervisor"]) == (vmx, svm, hypervisor)
    assert cpu["lm"] is True
    assert cpu["sse4_1"] is True


@pytest.mark.parametrize(("raw", "enabled"), [("Y", True), ("N", False), ("1", True), ("0", False)])
def test_nested_parameter_of_kvm_intel(tmp_path: Path, raw: str, enabled: bool) -> None:
    root = _sys_module(tmp_path, {"kvm": None, "kvm_intel": raw})
    assert kvm_probe.probe_nested(str(root)) == {"module": "kvm_intel", "enabled": enabled, "raw": raw}


def test_nested_parameter_of_kvm_amd_and_absent(tmp_path: Path) -> None:
    root = _sys_module(tmp_path, {"kvm_amd": "1"})
    assert kvm_probe.probe_nested(str(root))["module"] == "kvm_amd"
    assert kvm_probe.probe_nested(str(tmp_path / "nothing")) == {"module": None, "enabled": None, "raw": None}


def test_modules_from_sysfs_and_proc_modules(tmp_path: Path) -> None:
    root = _sys_module(tmp_path, {"kvm": None, "vhost": None})
    modules = kvm_probe.probe_modules(str(root), str(FIXTURES / "modules-vhost"))
    assert modules["kvm"] == {"present": True, "source": "sysfs"}
    assert modules["vhost_net"] == {"present": True, "source": "proc_modules"}
    assert modules["vhost_vsock"] == {"present": True, "source": "proc_modules"}
    assert modules["kvm_amd"] == {"present": False, "source": None}


def test_missing_proc_modules_is_not_an_error(tmp_path: Path) -> None:
    root = _sys_module(tmp_path, {"vhost_net": None})
    modules = kvm_probe.probe_modules(str(root), str(tmp_path / "no-modules"))
    assert modules["vhost_net"]["present"] is True
    assert modules["vhost_vsock"]["present"] is False


def test_module_via_ansible_reports_missing_device_without_failing(tmp_path: Path) -> None:
    result = adhoc_json(
        "kvm_probe",
        f"device={tmp_path}/kvm cpuinfo={FIXTURES}/cpuinfo-amd-svm"
        f" sys_module_root={tmp_path} proc_modules={FIXTURES}/modules-vhost",
        "plugins/modules",
    )
    assert result.get("failed", False) is False
    assert result["changed"] is False
    assert result["ready"] is False
    assert f"{tmp_path}/kvm does not exist" in result["reason"]
    assert result["cpu"]["vendor"] == "AuthenticAMD"
    assert result["modules"]["vhost_net"]["present"] is True


@pytest.mark.root
@pytest.mark.skipif(not HAVE_KVM, reason="needs root and /dev/kvm")
def test_module_via_ansible_on_real_dev_kvm() -> None:
    result = adhoc_json("kvm_probe", "device=/dev/kvm", "plugins/modules")
    assert result["ready"] is True
    assert result["kvm"]["api_version"] == 12
