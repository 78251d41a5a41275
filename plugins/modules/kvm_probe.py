#!/usr/bin/python
# Copyright: Many-Core Orchestrator authors
# Mulan PSL v2 (see LICENSE)
"""Probe KVM usability with ioctls, CPU flags and kernel module state."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kvm_probe
short_description: Probe whether this host can run KVM virtual machines
description:
  - Opens the KVM device, checks C(KVM_GET_API_VERSION) (0xAE00) is 12, creates a
    virtual machine (C(KVM_CREATE_VM), 0xAE01) and a virtual CPU on it
    (C(KVM_CREATE_VCPU), 0xAE41), then closes every descriptor.
  - Reads CPU vendor and the flags C(vmx), C(svm), C(lm), C(sse4_1) and C(hypervisor)
    from a cpuinfo file. The flags are information only; on nested or paravirtual
    hosts C(vmx)/C(svm) can be missing while KVM works.
  - Reads nested-virtualisation and C(kvm), C(kvm_intel), C(kvm_amd), C(vhost),
    C(vhost_net), C(vhost_vsock) state from the sysfs module tree and, when present,
    the modules list. Never loads modules.
  - Never fails because KVM is unusable; it returns O(ready=false) with a reason.
  - Read-only; supports check mode.
version_added: "0.1.0"
author: Many-Core Orchestrator authors
options:
  device:
    description: Path of the KVM character device.
    type: path
    default: /dev/kvm
  cpuinfo:
    description: Path of the cpuinfo file to read CPU vendor and flags from.
    type: path
    default: /proc/cpuinfo
  sys_module_root:
    description: Root of the sysfs module tree.
    type: path
    default: /sys/module
  proc_modules:
    description: Path of the loaded-modules list. Missing file is not an error.
    type: path
    default: /proc/modules
  create_vm:
    description: Create a test VM and vCPU after the API version check.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Probe KVM
  kvm_probe:
    device: /dev/kvm
  register: __kvm_check_probe

- name: Probe against a fixture tree
  kvm_probe:
    device: /nonexistent/kvm
    cpuinfo: tests/fixtures/cpuinfo
    sys_module_root: tests/fixtures/sys/module
    proc_modules: tests/fixtures/modules
"""

RETURN = r"""
ready:
  description: True when the device opened, the API version is 12 and (unless disabled) a VM and vCPU were created.
  returned: always
  type: bool
  sample: true
reason:
  description: Why the host is not ready; empty when ready.
  returned: always
  type: str
  sample: "/dev/kvm does not exist"
kvm:
  description: Result of each ioctl step.
  returned: always
  type: dict
  sample: {"device": "/dev/kvm", "present": true, "api_version": 12, "vm_created": true, "vcpu_created": true}
cpu:
  description: CPU vendor and the flags that matter for Kata.
  returned: always
  type: dict
  sample: {"vendor": "GenuineIntel", "vmx": false, "svm": false, "lm": true, "sse4_1": true, "hypervisor": true}
nested:
  description: Nested virtualisation parameter of kvm_intel or kvm_amd; null when neither module is there.
  returned: always
  type: dict
  sample: {"module": "kvm_intel", "enabled": true, "raw": "Y"}
modules:
  description: Per module whether it is present (built in or loaded) and where that was seen.
  returned: always
  type: dict
  sample: {"vhost_net": {"present": true, "source": "sysfs"}}
"""

import contextlib  # noqa: E402 - Ansible modules import after DOCUMENTATION
import errno  # noqa: E402
import fcntl  # noqa: E402
import os  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

KVM_GET_API_VERSION = 0xAE00
KVM_CREATE_VM = 0xAE01
KVM_CREATE_VCPU = 0xAE41
KVM_API_VERSION = 12
CPU_FLAGS = ("vmx", "svm", "lm", "sse4_1", "hypervisor")
MODULES = ("kvm", "kvm_intel", "kvm_amd", "vhost", "vhost_net", "vhost_vsock")


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


class _ProbeError(Exception):
    """A probe step failed; the message is the user-facing reason."""


def _ioctl(fd: int, request: int, what: str, device: str) -> int:
    try:
        return int(fcntl.ioctl(fd, request, 0))
    except OSError as exc:
        raise _ProbeError(f"{what} on {device} failed: {exc.strerror}") from exc


def _run_ioctls(device: str, create_vm: bool, result: dict[str, Any], fds: list[int]) -> None:
    try:
        fds.append(os.open(device, os.O_RDWR | os.O_CLOEXEC))
    except OSError as exc:
        hint = " (run as root or add the user to the kvm group)" if exc.errno in (errno.EACCES, errno.EPERM) else ""
        raise _ProbeError(f"cannot open {device}: {exc.strerror}{hint}") from exc
    version = _ioctl(fds[0], KVM_GET_API_VERSION, "KVM_GET_API_VERSION (not a KVM device?)", device)
    result["api_version"] = version
    if version != KVM_API_VERSION:
        raise _ProbeError(f"KVM API version on {device} is {version}, expected {KVM_API_VERSION}")
    if not create_vm:
        return
    fds.append(_ioctl(fds[0], KVM_CREATE_VM, "KVM_CREATE_VM (virtualisation disabled or in use?)", device))
    result["vm_created"] = True
    fds.append(_ioctl(fds[1], KVM_CREATE_VCPU, "KVM_CREATE_VCPU", device))
    result["vcpu_created"] = True


def probe_device(device: str, create_vm: bool = True) -> dict[str, Any]:
    """Run the KVM ioctls on ``device``; every descriptor is closed before returning."""
    result: dict[str, Any] = {
        "device": device,
        "present": os.path.exists(device),
        "api_version": None,
        "vm_created": False,
        "vcpu_created": False,
        "error": "",
    }
    if not result["present"]:
        result["error"] = f"{device} does not exist (no KVM driver, or the device is not passed into this container/VM)"
        return result
    fds: list[int] = []
    try:
        _run_ioctls(device, create_vm, result, fds)
    except _ProbeError as exc:
        result["error"] = str(exc)
    finally:
        for fd in reversed(fds):
            with contextlib.suppress(OSError):
                os.close(fd)
    return result


def probe_cpu(cpuinfo: str) -> dict[str, Any]:
    """Vendor and selected flags of the first CPU listed in ``cpuinfo``."""
    text = _read_text(cpuinfo)
    result: dict[str, Any] = {"source": cpuinfo, "readable": text is not None, "vendor": None}
    result.update(dict.fromkeys(CPU_FLAGS, False))
    if text is None:
        return result
    flags: set[str] = set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        if key == "vendor_id" and result["vendor"] is None:
            result["vendor"] = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    for flag in CPU_FLAGS:
        result[flag] = flag in flags
    return result


def _loaded_modules(proc_modules: str) -> set[str] | None:
    text = _read_text(proc_modules)
    if text is None:
        return None
    return {line.split()[0] for line in text.splitlines() if line.strip()}


def probe_modules(sys_module_root: str, proc_modules: str) -> dict[str, dict[str, Any]]:
    """Whether each module of interest is present (sysfs directory or modules list)."""
    loaded = _loaded_modules(proc_modules)
    result: dict[str, dict[str, Any]] = {}
    for name in MODULES:
        if os.path.isdir(os.path.join(sys_module_root, name)):
            result[name] = {"present": True, "source": "sysfs"}
        elif loaded is not None and name in loaded:
            result[name] = {"present": True, "source": "proc_modules"}
        else:
            result[name] = {"present": False, "source": None}
    return result


def probe_nested(sys_module_root: str) -> dict[str, Any]:
    """The ``nested`` parameter of kvm_intel or kvm_amd (Y/N/1/0)."""
    for module in ("kvm_intel", "kvm_amd"):
        text = _read_text(os.path.join(sys_module_root, module, "parameters", "nested"))
        if text is not None:
            raw = text.strip()
            return {"module": module, "enabled": raw.upper() in ("Y", "1"), "raw": raw}
    return {"module": None, "enabled": None, "raw": None}


def probe(
    device: str = "/dev/kvm",
    cpuinfo: str = "/proc/cpuinfo",
    sys_module_root: str = "/sys/module",
    proc_modules: str = "/proc/modules",
    create_vm: bool = True,
) -> dict[str, Any]:
    """Everything the module returns, without Ansible."""
    kvm = probe_device(device, create_vm=create_vm)
    ready = kvm["error"] == ""
    return {
        "ready": ready,
        "reason": kvm["error"],
        "kvm": kvm,
        "cpu": probe_cpu(cpuinfo),
        "nested": probe_nested(sys_module_root),
        "modules": probe_modules(sys_module_root, proc_modules),
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "device": {"type": "path", "default": "/dev/kvm"},
            "cpuinfo": {"type": "path", "default": "/proc/cpuinfo"},
            "sys_module_root": {"type": "path", "default": "/sys/module"},
            "proc_modules": {"type": "path", "default": "/proc/modules"},
            "create_vm": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    facts = probe(
        device=params["device"],
        cpuinfo=params["cpuinfo"],
        sys_module_root=params["sys_module_root"],
        proc_modules=params["proc_modules"],
        create_vm=params["create_vm"],
    )
    module.exit_json(changed=False, **facts)


if __name__ == "__main__":
    main()
