"""The bcc backend can load in MCO's venv: the collector role's .pth exposes Debian's bcc module, and only it."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEBIAN_BCC = Path("/usr/lib/python3/dist-packages/bcc")
pytestmark = pytest.mark.skipif(
    not DEBIAN_BCC.is_dir(), reason="Debian's python3-bpfcc is not installed (make setup installs it as root)"
)


def role_pth_layout() -> tuple[str, str]:
    """What roles/mco_collector/tasks/install.yml links and writes: (link source, .pth file name)."""
    tasks = yaml.safe_load((ROOT / "roles/mco_collector/tasks/install.yml").read_text())
    block = next(t for t in tasks if "bcc" in t["name"])["block"]
    link = next(t for t in block if t.get("ansible.builtin.file", {}).get("state") == "link")
    pth = next(t for t in block if "ansible.builtin.copy" in t)
    return link["ansible.builtin.file"]["src"], Path(pth["ansible.builtin.copy"]["dest"]).name


def test_the_venv_imports_bcc_through_the_roles_pth_and_the_collector_selects_it(tmp_path: Path) -> None:
    source, pth_name = role_pth_layout()
    assert Path(source) == DEBIAN_BCC
    env_dir, links = tmp_path / "venv", tmp_path / "debian-bcc"
    venv.create(env_dir)  # like /opt/mco/venv: no system site-packages
    python = env_dir / "bin" / "python"
    hidden = subprocess.run([str(python), "-c", "import bcc"], capture_output=True, text=True, check=False)
    assert hidden.returncode != 0, "a plain venv must not see Debian's bcc (else this test proves nothing)"
    links.mkdir()
    (links / "bcc").symlink_to(source)
    site = next((env_dir / "lib").glob("python3.*/site-packages"))
    (site / pth_name).write_text(f"{links}\n")
    probe = (
        "import sys; sys.path.append(sys.argv[1]);"
        "from mco_py.collector.biolatency import probe_bcc, Unavailable\n"
        "try:\n    probe_bcc(); print('selected')\n"
        "except Unavailable as exc:\n    print('unavailable:', exc)\n"
        "import yaml\n"  # Debian's other packages stay hidden
    )
    run = subprocess.run([str(python), "-c", probe, str(ROOT)], capture_output=True, text=True, check=False)
    assert "does not import" not in run.stdout, run.stdout + run.stderr
    assert run.stdout.startswith(("selected", "unavailable: no kernel headers")), run.stdout + run.stderr
    assert "No module named 'yaml'" in run.stderr
