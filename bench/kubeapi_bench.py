"""Throughput of the emulated API server (tests/kubeapi) with the real kubernetes client.

Prints figures; no assertions. Run: .venv/bin/python -m bench.kubeapi_bench
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import yaml
from kubernetes import client, config, dynamic

from tests.kubeapi import start

ROOT = Path(__file__).resolve().parents[1]


def _report(nodes: int) -> dict[str, object]:
    sample = json.loads((ROOT / "tests" / "contracts" / "sample_report.json").read_text())
    template = sample["status"]["nodes"][0]
    sample["status"]["nodes"] = [{**copy.deepcopy(template), "name": f"node-{i}"} for i in range(nodes)]
    return sample


def main() -> None:
    api = start()
    with TemporaryDirectory() as tmp:
        api_client = config.new_client_from_config(str(api.write_kubeconfig(Path(tmp) / "kubeconfig")))
        core = client.CoreV1Api(api_client)
        core.create_namespaced_config_map("default", {"metadata": {"name": "bench"}, "data": {"a": "1"}})
        n = 300
        start_time = time.perf_counter()
        for _ in range(n):
            core.read_namespaced_config_map("bench", "default")
        get_rate = n / (time.perf_counter() - start_time)
        start_time = time.perf_counter()
        for i in range(n):
            core.patch_namespaced_config_map("bench", "default", {"data": {"a": str(i)}})
        patch_rate = n / (time.perf_counter() - start_time)

        dyn = dynamic.DynamicClient(api_client, cache_file=str(Path(tmp) / "discovery.json"))
        crd = yaml.safe_load((ROOT / "mco_py" / "data" / "crds" / "nodeinterferencereports.yaml").read_text())
        dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition").create(body=crd)
        nir = dyn.resources.get(api_version="mco.many-core.io/v1alpha1", kind="NodeInterferenceReport")
        report = _report(1000)
        status = report.pop("status")
        nir.create(body=report)
        writes = 10
        start_time = time.perf_counter()
        for _ in range(writes):
            nir.status.patch(name="cluster", body={"status": status}, content_type="application/merge-patch+json")
        status_ms = (time.perf_counter() - start_time) / writes * 1000
        api_client.close()
    api.stop()
    print(f"kubeapi: GET configmap {get_rate:.0f}/s, PATCH configmap {patch_rate:.0f}/s (one client, keep-alive)")
    print(f"kubeapi: NodeInterferenceReport status write with 1000 nodes (validated) {status_ms:.1f} ms")


if __name__ == "__main__":
    main()
