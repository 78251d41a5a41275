"""`mco` command line: version and rules validation, run as a user would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mco_py

MCO = [sys.executable, "-m", "mco_py.cli"]


def run(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``mco ARGS`` with this environment, without KUBECONFIG unless ``env`` gives it."""
    environ = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    return subprocess.run(
        [*MCO, *args], capture_output=True, text=True, timeout=60, check=False, input=stdin, env=environ | (env or {})
    )


def test_version() -> None:
    out = run("version")
    assert out.returncode == 0
    assert out.stdout.startswith(f"mco {mco_py.__version__}")
    flag = run("--version")
    assert flag.returncode == 0, flag.stderr
    assert flag.stdout == out.stdout


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "mco"
    out = subprocess.run([str(script), "version"], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr


def test_validate_default_rules(tmp_path: Path) -> None:
    default = run("rules", "default")
    assert default.returncode == 0
    path = tmp_path / "rules.yaml"
    path.write_text(default.stdout)
    out = run("rules", "validate", str(path))
    assert out.returncode == 0, out.stderr
    assert "valid (version" in out.stdout
    assert "format 2, dimensions: cpu (2), memory (3), io (3), cache (1)" in out.stdout
    piped = run("rules", "validate", "-", stdin=default.stdout)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith("-: valid")


def test_wrong_typed_rules_exit_1_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text('version: "1"\nsignals:\n  psiCpuSomeAvg10:\n    warn: 20\n    critical: [50]\n')
    out = run("rules", "validate", str(path))
    assert out.returncode == 1
    assert "signals.psiCpuSomeAvg10.critical: expected a number, got a list" in out.stderr
    assert run("rules", "migrate", str(path)).returncode == 1


def test_format_1_rules_validate_with_notes_and_migrate_to_format_2(tmp_path: Path) -> None:
    old = tmp_path / "old.yaml"
    old.write_text(
        'version: "2026.11.1"\nsignals:\n  psiCpuSomeAvg10: {warn: 20, critical: 50, weight: 2}\n'
        "  psiIoSomeAvg10: {warn: 20, critical: 50}\n"
    )
    checked = run("rules", "validate", str(old))
    assert checked.returncode == 0, checked.stderr
    assert "format 1" in checked.stdout
    assert "note: format 1 (flat signals) read as format 2" in checked.stdout
    migrated = run("rules", "migrate", str(old))
    assert migrated.returncode == 0, migrated.stderr
    assert "signals.psiCpuSomeAvg10: weight 2 dropped" in migrated.stderr
    new = tmp_path / "new.yaml"
    new.write_text(migrated.stdout)
    out = run("rules", "validate", str(new))
    assert out.returncode == 0, out.stderr
    assert "format 2, dimensions: cpu (1), io (1)" in out.stdout
    assert "note:" not in out.stdout
    assert run("rules", "migrate", "-", stdin=old.read_text()).stdout == migrated.stdout.replace(str(old), "-")


def test_missing_file_exit_1(tmp_path: Path) -> None:
    out = run("rules", "validate", str(tmp_path / "nope.yaml"))
    assert out.returncode == 1
    assert "cannot read" in out.stderr


def _write_report(path: Path, *, level: str = "Low") -> None:
    from mco_py.model import DimensionScore, Level, NodeAssessment, Report
    from mco_py.store.file import FileReportStore

    now = time.time()
    FileReportStore(path).write(
        Report(
            last_update_time=now,
            analyzer_identity="host-a",
            rules_version="2026.11.1",
            nodes=(
                NodeAssessment(
                    name="host-a",
                    level=Level(level),
                    score=31.25,
                    signals={"psiIoSomeAvg10": 27.5, "bioLatencyP99Ms": 3.2},
                    last_sample_time=now - 2,
                    reasons=("psiIoSomeAvg10=27.5 above warn 20",),
                    dominant="io",
                    dimensions={"io": DimensionScore(Level.LOW, 31.25), "cpu": DimensionScore(Level.NONE, 4.5)},
                ),
            ),
        )
    )


def test_report_table_json_yaml(tmp_path: Path) -> None:
    import json

    import yaml

    path = tmp_path / "report.json"
    _write_report(path)
    table = run("report", "--file", str(path))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[1].split()[:3] == ["NODE", "LEVEL", "SCORE"]
    row = lines[2].split()
    assert row[:3] == ["host-a", "Low", "31.2"]
    assert "27.50" in row
    assert "host-a: psiIoSomeAvg10=27.5 above warn 20" in table.stdout
    wide = run("report", "--file", str(path), "-o", "wide").stdout.splitlines()
    assert wide[1].split()[-2:] == ["DOMINANT", "DIMENSIONS"]
    assert wide[2].split()[-2:] == ["io", "io=Low/31.2,cpu=None/4.5"]
    as_json = json.loads(run("report", "--file", str(path), "-o", "json").stdout)
    assert as_json["nodes"][0]["level"] == "Low"
    assert as_json["nodes"][0]["dimensions"]["io"] == {"level": "Low", "score": 31.25}
    as_yaml = yaml.safe_load(run("report", "--file", str(path), "-o", "yaml").stdout)
    assert as_yaml["analyzer"]["rulesVersion"] == "2026.11.1"


def test_report_missing_and_garbage(tmp_path: Path) -> None:
    missing = run("report", "--file", str(tmp_path / "none.json"))
    assert missing.returncode == 1
    assert "no report yet" in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    garbage = run("report", "--file", str(bad))
    assert garbage.returncode == 1
    assert "not valid JSON" in garbage.stderr


def _report_in_the_cluster(kubeconfig: Path) -> None:
    """The NodeInterferenceReport CRD and a report with node w1 at High, in the API server of ``kubeconfig``."""
    from kubernetes import client, utils

    from mco_py.kube.client import load_api_client
    from mco_py.model import Level, NodeAssessment, Report
    from mco_py.store.kube import KubeReportStore

    api = load_api_client(kubeconfig)
    utils.create_from_yaml(
        api, str(Path(__file__).resolve().parents[1] / "mco_py/data/crds/nodeinterferencereports.yaml")
    )
    assert client.ApiextensionsV1Api(api).read_custom_resource_definition("nodeinterferencereports.mco.many-core.io")
    KubeReportStore(api).write(
        Report(
            last_update_time=1_800_000_000.0,
            analyzer_identity="ctl",
            rules_version="r9",
            nodes=(NodeAssessment(name="w1", level=Level.HIGH, score=90.0),),
        )
    )


def test_report_from_the_cluster(kube_api: object, kubeconfig: Path) -> None:
    import json

    _report_in_the_cluster(kubeconfig)
    out = run("report", "--kubeconfig", str(kubeconfig), "-o", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["nodes"][0]["level"] == "High"
    missing = run("report", "--kubeconfig", str(kubeconfig), "--name", "other")
    assert missing.returncode == 1
    assert "no report yet" in missing.stderr


def test_report_names_and_rows_without_headers(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    _write_report(path)
    names = run("report", "--file", str(path), "-o", "name")
    assert (names.returncode, names.stdout) == (0, "node/host-a\n"), names.stderr
    (row,) = run("report", "--file", str(path), "--no-headers").stdout.splitlines()
    assert row.split()[:3] == ["host-a", "Low", "31.2"]
    (wide,) = run("report", "--file", str(path), "-o", "wide", "--no-headers").stdout.splitlines()
    assert wide.split()[-2:] == ["io", "io=Low/31.2,cpu=None/4.5"]
    bad = run("report", "--file", str(path), "-o", "xml")
    assert bad.returncode == 2
    assert "invalid choice: 'xml'" in bad.stderr


def test_report_watch_prints_each_change_and_says_a_read_error_once(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    _write_report(path)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    with subprocess.Popen(
        [*MCO, "report", "--file", str(path), "--watch", "--no-headers", "-o", "wide"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as watch:
        assert watch.stdout is not None
        assert watch.stderr is not None
        try:
            assert watch.stdout.readline().split()[:2] == ["host-a", "Low"]
            _write_report(path, level="High")
            assert watch.stdout.readline().split()[:2] == ["host-a", "High"]
            path.unlink()
            assert "does not exist yet (still watching)" in watch.stderr.readline()
            time.sleep(2.5)  # two more polls see the same error: it is not said again
            _write_report(path, level="Medium")
            assert watch.stdout.readline().split()[:2] == ["host-a", "Medium"]
            watch.send_signal(signal.SIGINT)
            assert watch.wait(timeout=10) == 0
            assert watch.stderr.read() == ""
        finally:
            watch.kill()


def test_report_reads_the_cluster_of_kubeconfig_env_unless_a_file_is_given(kube_api: object, kubeconfig: Path) -> None:
    import json

    _report_in_the_cluster(kubeconfig)
    # $KUBECONFIG wins over in-cluster config, as with kubectl
    env = {"KUBECONFIG": str(kubeconfig), "KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    out = run("report", "-o", "json", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["nodes"][0]["name"] == "w1"
    table = run("report", env=env)
    assert table.stdout.startswith("report NodeInterferenceReport cluster"), table.stdout
    from_file = run("report", "-o", "name", "--file", str(kubeconfig.parent / "none.json"), env=env)
    assert from_file.returncode == 1
    assert "none.json does not exist yet" in from_file.stderr  # the file, not the cluster
    both = run("report", "--file", "r.json", "--kubeconfig", str(kubeconfig))
    assert both.returncode == 2
    assert "not allowed with argument" in both.stderr
    broken = run("report", env={"KUBECONFIG": str(kubeconfig.parent / "missing")})
    assert broken.returncode == 1
    assert "$KUBECONFIG=" in broken.stderr
    assert "fix it, or unset it" in broken.stderr


def test_report_follows_kubectls_order_and_says_which_source_it_used(kube_api: object, kubeconfig: Path) -> None:
    """An admin workstation: ~/.kube/config (over in-cluster), $KUBECONFIG's list with kubectl's
    context (the first file that sets one), in-cluster, and only then this host's report file."""
    import json

    import yaml

    _report_in_the_cluster(kubeconfig)
    home = kubeconfig.parent / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(kubeconfig.read_text())
    out = run("report", "-o", "json", env={"HOME": str(home), "KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["nodes"][0]["name"] == "w1"
    assert out.stderr == f"mco report: reading the cluster of ~/.kube/config ({home}/.kube/config), context emulated\n"

    # $KUBECONFIG: a missing file left out; the first current-context wins (kubectl), not the last
    config = yaml.safe_load(kubeconfig.read_text())
    first = kubeconfig.parent / "first.yaml"
    first.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "emulated"}))
    second = kubeconfig.parent / "second.yaml"
    config["clusters"].append({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}})
    config["contexts"].append({"name": "nowhere", "context": {"cluster": "nowhere", "user": "emulated"}})
    config["current-context"] = "nowhere"
    second.write_text(yaml.safe_dump(config))
    listed = f"{kubeconfig.parent / 'missing.yaml'}:{first}:{second}"
    out = run("report", "-o", "name", env={"HOME": str(home), "KUBECONFIG": listed})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "node/w1\n"
    assert out.stderr == f"mco report: reading the cluster of $KUBECONFIG={listed}, context emulated\n"

    # no kubeconfig anywhere: in-cluster, which says what is wrong when there is no ServiceAccount token
    empty = kubeconfig.parent / "empty-home"
    empty.mkdir()
    pod = run("report", env={"HOME": str(empty), "KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert pod.returncode == 1
    assert "in-cluster configuration (KUBERNETES_SERVICE_HOST is set) is not usable" in pod.stderr, pod.stderr

    # nothing configured: this host's report file, said as such (not "is the analyzer running?" alone)
    host = run("report", env={"HOME": str(empty)})
    assert host.stderr.splitlines()[0] == (
        "mco report: no cluster configured (--kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster): "
        "reading this host's report file /var/lib/mco/report.json"
    ), host.stderr
