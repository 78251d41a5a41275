"""Protection on real pods: an online redis pod's latency beside offline antagonist pods, MCO off and on.

Not part of `make test` (its short form is the `protection` tier). Root; the set-up is the
protection tier's: `molecule create/prepare/converge -s kube_nodes_booted` (two kubelet nodes,
MCO installed by site.yml with the guard on, Volcano, MCO's kube-scheduler). The benchmark
empties the scenario's test namespaces first, then on node-b:

- online: a redis pod (Burstable, 100m); an open-loop client in that pod's cgroups on node-b
  (redis_latency.py: each request's latency counts from when it was due), PINGs for the CPU and cache antagonists, SETs
  with `appendfsync always` (an fsync before each reply) for the disk antagonist;
- offline: one stress-ng pod (`--cpu 2`, `--cache 2`, or `--hdd 2 --hdd-opts direct` on an
  emptyDir) placed by Volcano, asking for a whole CPU, so the kubelet's CPU weights alone do not
  favour redis; throughput in bogo ops/s from `--metrics-brief`;
- conditions, alternated in each round: no antagonist; antagonist with MCO's guard off (node-b's
  collector stopped: a clean stop gives every limit back); antagonist with the guard on (the
  detection rules' defaults; CPU, memory and I/O guarded, the collector's default); guard +
  scheduler: the guard on, and while the antagonist runs, every second, a new online replica (a
  pause pod for MCO's kube-scheduler that prefers node-b, so that without MCO's score it would
  join the measured pod there) and two new batch pods for Volcano (BestEffort pause pods that
  prefer node-b), one sensitive to the antagonist's dimension and one to another; newcomers
  only: the same new pods with no antagonist, the baseline of "guard + scheduler" (the nodes
  share this host's CPUs, so every pod start on either node costs the redis pod some latency).
- every condition starts once node-b's level in the antagonist's dimension is None and the redis
  pod has stopped stalling (settle_s: the seconds that took). After each no-antagonist
  condition, with an idle pod holding the antagonist's CPU request, three replicas and three
  batch pods show the preferences hold on a calm node (replicas_on_node_b, batch_on_node_b: 1.0
  = all).
- figures: the redis client's p50/p99/p99.9; the batch pod's bogo ops/s; the redis pod's own
  CPU and I/O stall share over the measured seconds (its cgroup's PSI, the signal the guard
  steers by); with the guard on, the seconds from the antagonist pod's start to the guard's
  first write on its group (its CPU weight) and to node-b's level in the antagonist's dimension
  reaching Medium or High; in disk rounds the guard's offline I/O limit at the end (share of the
  batch's rate when first limited); with new pods, the seconds to the first replica and the
  first batch pod of the antagonist's dimension placed on node-a, how many were submitted while
  node-b was High and node-a None (overall for the replicas, which name no dimension; in the
  dimension for the batch pods) and how many of those went to node-b (target 0), and the share
  of the other dimension's batch pods left on node-b (steering by dimension).

Prints every round, then medians [min-max] per condition and the ratios the protection targets
name: p99 with the guard / no antagonist (target <= 1.3) and offline throughput with the guard /
guard off (target >= 0.5).

Usage: .venv/bin/python bench/protection/run.py [--rounds 3] [--seconds 20] [--antagonists cpu,disk]
       [--reuse] [--keep]
(--reuse: the scenario's nodes are up and converged already; --keep: leave them up afterwards)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.guard.bench_guard import bogo_ops_per_s  # noqa: E402 - stress-ng's figures, read as bench/guard does
from testbed.nodes import Bed  # noqa: E402
from tests.waiting import wait_until  # noqa: E402

SCENARIO = "kube_nodes_booted"
NAMESPACE = "mco-bench-protection"
#: The scenario's own test namespaces (their pods load node-a and node-b) and the bench's.
TEST_NAMESPACES = frozenset({"kube-nodes-test", "volcano-job-test", NAMESPACE})
CLIENT = Path(__file__).with_name("redis_latency.py")
CLASS_LABEL = "mco.many-core.io/workload-class"
NODE_TAINT = {"key": "mco.many-core.io/guard-test", "operator": "Exists", "effect": "NoSchedule"}
WARMUP_S = 3.0
METRICS = "http://127.0.0.1:9877/metrics"
STRESSORS = {
    "cpu": ["--cpu", "2"],
    "cache": ["--cache", "2"],
    "disk": ["--hdd", "2", "--hdd-opts", "direct", "--hdd-bytes", "256m", "--temp-path", "/scratch"],
}
NEWCOMERS_ONLY = "newcomers only"
CONDITIONS = ("no antagonist", NEWCOMERS_ONLY, "guard off", "guard on", "guard + scheduler")
#: New online replicas in "guard + scheduler": MCO's kube-scheduler, a preference for node-b (so
#: without MCO's score they would join the measured pod there), one a second.
REPLICAS = 12
PREFER_NODE_B = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "preference": {
                    "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-b"]}]
                },
            }
        ]
    }
}
#: New batch pods in "guard + scheduler": Volcano, a preference for node-b (nodeorder adds twice
#: the term's weight, 50, to node-b's score; mco-plugin adds 100 minus the node's score in the
#: pod's dimension: 75-100 at None, 50-75 at Low, 0-25 at High), so it holds on a calm node and
#: yields to a High one beside one at None.
VOLCANO_PREFER_NODE_B = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {**PREFER_NODE_B["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0], "weight": 25}
        ]
    }
}
SENSITIVE_TO = "mco.many-core.io/sensitive-to"
#: The report's dimension each antagonist should raise, and one it should not.
DIMENSION = {"cpu": "cpu", "cache": "cache", "disk": "io"}
OTHER = {"cpu": "io", "cache": "io", "disk": "cpu"}


def bed_name() -> str:
    spec = importlib.util.spec_from_file_location("bed", ROOT / "molecule" / "shared" / "inventory" / "bed.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    name: str = module.bed_name(SCENARIO, str(ROOT))
    return name


def molecule(step: str) -> None:
    print(f"-- molecule {step} -s {SCENARIO}", flush=True)
    venv = ROOT / ".venv" / "bin"  # molecule runs ansible-playbook and ansible-config from the venv
    env = {**os.environ, "PATH": f"{venv}:{os.environ.get('PATH', '')}", "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}
    subprocess.run([str(venv / "molecule"), step, "-s", SCENARIO], cwd=ROOT, env=env, check=True)


class Nodes:
    """Commands on the bed's nodes, over the testbed's own ssh (no Python process per command: the
    watcher polls while a round is measured)."""

    def __init__(self, bed: str) -> None:
        self.bed = Bed(bed)

    def run(self, node: str, script: str, *, stdin: str | None = None, timeout: float = 120) -> str:
        argv = self.bed.ssh_argv(node, [script])
        done = subprocess.run(argv, cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{node}: {script!r} failed: {done.stderr.strip()[-500:]}")
        return done.stdout


class Cluster:
    """The pods of the benchmark and the report, through the API server."""

    def __init__(self, kubeconfig: Path) -> None:
        api = config.new_client_from_config(str(kubeconfig))
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    def reset(self) -> None:
        """The scenario's own test pods away (they load node-a and node-b), a fresh namespace."""
        for namespace in TEST_NAMESPACES:
            with contextlib.suppress(ApiException):
                self.core.delete_namespace(namespace)
        wait_until(
            lambda: not {n.metadata.name for n in self.core.list_namespace().items} & TEST_NAMESPACES,
            "the test namespaces to be deleted",
            180,
            every=1,
        )
        self.core.create_namespace({"metadata": {"name": NAMESPACE}})

    def pod(
        self, name: str, image: str, args: list[str], *, cls: str, cpu: str, scratch: str = "", scheduler: str = ""
    ) -> None:
        """A pod on node-b that runs once (``scheduler``: placed by that scheduler, else by the
        default one)."""
        spec: dict[str, Any] = {"nodeSelector": {"kubernetes.io/hostname": "node-b"}, "restartPolicy": "Never"}
        if scheduler:
            spec["schedulerName"] = scheduler
        if scratch:
            spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        self.create(name, image, cls, spec, cpu=cpu, args=args, scratch=scratch)

    def replica(self, name: str, image: str) -> None:
        """A new online replica (a pause container) for MCO's kube-scheduler, preferring node-b."""
        spec = {"schedulerName": "mco-scheduler", "affinity": PREFER_NODE_B}
        self.create(name, image, "online", spec, cpu="10m", labels={"app": "newcomer"})

    def batch(self, name: str, image: str, sensitive_to: str) -> None:
        """A new offline pod (BestEffort, a pause container) for Volcano, preferring node-b a little
        and naming the dimension its work depends on."""
        spec = {"schedulerName": "volcano", "affinity": VOLCANO_PREFER_NODE_B}
        self.create(name, image, "offline", spec, labels={"app": "newcomer"}, annotations={SENSITIVE_TO: sensitive_to})

    def create(
        self,
        name: str,
        image: str,
        cls: str,
        spec: dict[str, Any],
        *,
        cpu: str = "",
        args: list[str] | None = None,
        scratch: str = "",
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> None:
        """Pod ``name`` of workload class ``cls`` (one container, never pulled, tolerating the
        scenario's taint), with ``spec``'s fields."""
        container: dict[str, Any] = {"name": "main", "image": image, "imagePullPolicy": "Never"}
        if args is not None:
            container["args"] = args
        if cpu:
            container["resources"] = {"requests": {"cpu": cpu}}
        if scratch:
            container["volumeMounts"] = [{"name": "scratch", "mountPath": scratch}]
        body = {
            "metadata": {
                "name": name,
                "labels": {CLASS_LABEL: cls, **(labels or {})},
                "annotations": annotations or {},
            },
            "spec": {
                "tolerations": [NODE_TAINT],
                "automountServiceAccountToken": False,
                "containers": [container],
                **spec,
            },
        }
        self.core.create_namespaced_pod(NAMESPACE, body)

    def bound(self, name: str, timeout: float = 60) -> str:
        """The node pod ``name`` was bound to."""
        return str(
            wait_until(
                lambda: self.core.read_namespaced_pod(name, NAMESPACE).spec.node_name,
                f"pod {name} to be bound",
                timeout,
                every=0.2,
            )
        )

    def delete_newcomers(self) -> None:
        self.core.delete_collection_namespaced_pod(NAMESPACE, label_selector="app=newcomer", grace_period_seconds=0)
        wait_until(
            lambda: not self.core.list_namespaced_pod(NAMESPACE, label_selector="app=newcomer").items,
            "the new replicas and batch pods to go",
            120,
            every=0.5,
        )

    def wait_running(self, name: str, timeout: float = 120) -> Any:
        def running() -> Any:
            pod = self.core.read_namespaced_pod(name, NAMESPACE)
            if pod.status.phase in ("Failed", "Succeeded"):
                raise RuntimeError(f"pod {name} ended: {pod.status.phase}")
            ready = pod.status.phase == "Running" and all(c.ready for c in pod.status.container_statuses or [])
            return pod if ready else None

        return wait_until(running, f"pod {name} to run", timeout, every=0.2)

    def wait_ended(self, name: str, timeout: float) -> str:
        wait_until(
            lambda: self.core.read_namespaced_pod(name, NAMESPACE).status.phase in ("Failed", "Succeeded"),
            f"pod {name} to end",
            timeout,
            every=0.5,
        )
        logs: str = self.core.read_namespaced_pod_log(name, NAMESPACE)
        return logs

    def delete(self, name: str) -> None:
        with contextlib.suppress(ApiException):
            self.core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)

        def gone() -> bool:
            try:
                self.core.read_namespaced_pod(name, NAMESPACE)
            except ApiException:
                return True
            return False

        with contextlib.suppress(TimeoutError):  # still terminating after 120 s: the next create says so
            wait_until(gone, "the pod to go", 120, every=0.3)

    def levels(self) -> dict[str, tuple[str, dict[str, str]]]:
        """Each node's level, overall and by dimension (a dimension scoring 0 is not listed)."""
        report = self.custom.get_cluster_custom_object(
            "mco.many-core.io", "v1alpha1", "nodeinterferencereports", "cluster"
        )
        return {
            entry.get("name"): (
                entry.get("level", "Unknown"),
                {name: d.get("level", "None") for name, d in (entry.get("dimensions") or {}).items()},
            )
            for entry in (report.get("status") or {}).get("nodes") or []
        }

    def level(self, node: str, dimension: str) -> str:
        """``node``'s level in ``dimension``."""
        return level_in(self.levels(), node, dimension)


def level_in(levels: dict[str, tuple[str, dict[str, str]]], node: str, dimension: str = "") -> str:
    """``node``'s level in ``dimension``, or overall (``dimension`` empty), from :meth:`Cluster.levels`."""
    if node not in levels:
        return "not reported"
    overall, dimensions = levels[node]
    return dimensions.get(dimension, "None") if dimension else overall


def high_beside_none(levels: dict[str, tuple[str, dict[str, str]]], dimension: str = "") -> bool:
    """node-b is High while node-a is None, overall (``dimension`` empty: how a pod that names no
    dimension is scored) or in ``dimension``: the case of the target "no online pod placed on a
    High node while a None node has room" (the nodes share this host's CPUs, so a load on both,
    such as pods starting, can raise both)."""
    return level_in(levels, "node-b", dimension) == "High" and level_in(levels, "node-a", dimension) == "None"


def images() -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "scripts/build_images.py", "--print"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


class Bench:
    def __init__(self, cluster: Cluster, nodes: Nodes, args: argparse.Namespace) -> None:
        self.cluster, self.nodes, self.args = cluster, nodes, args
        self.image = images()
        self.redis_ip = self.redis_uid = ""

    def online(self, kind: str) -> None:
        """The redis pod for this antagonist's rounds (PINGs; SETs with an fsync each for disk)."""
        self.cluster.delete("online")
        persist = ["--appendonly", "yes", "--appendfsync", "always", "--dir", "/data"] if kind == "disk" else []
        args = ["--protected-mode", "no", "--save", "", "--port", "6379", *persist]
        self.cluster.pod("online", self.image["redis-image"], args, cls="online", cpu="100m", scratch="/data")
        pod = self.cluster.wait_running("online")
        self.redis_ip, self.redis_uid = pod.status.pod_ip, pod.metadata.uid

    def drive(self, kind: str) -> dict[str, float]:
        rate, command = (self.args.disk_rate, "SET") if kind == "disk" else (self.args.rate, "PING")
        # the client in the online pod's own groups on node-b: it waits for a CPU as redis does (the
        # nodes share this host's CPUs, so a client on node-a would compete with node-b's batch pod
        # as a whole node, beyond any weight inside node-b)
        pod = f"kubepods/burstable/pod{self.redis_uid}"
        groups = " ".join(f"/sys/fs/cgroup/{tree}/{pod}" for tree in ("cpu", "unified"))
        script = (
            f"for g in {groups}; do echo $$ > $g/cgroup.procs || exit 1; done; "
            f"exec python3 - {self.redis_ip} 6379 {rate:g} {self.args.seconds:g} {command}"
        )
        before = self.stalled()
        out = self.nodes.run("node-b", script, stdin=CLIENT.read_text(), timeout=self.args.seconds * 4 + 60)
        after = self.stalled()
        figures: dict[str, float] = json.loads(out)
        span = after["at"] - before["at"]
        for resource in ("cpu", "io"):
            figures[f"online_{resource}_stall_pct"] = 100 * (after[resource] - before[resource]) / span
        return figures

    def stalled(self) -> dict[str, float]:
        """The redis pod's stall seconds on CPU and I/O so far (PSI some total= of its unified
        group), and when they were read (seconds)."""
        group = f"/sys/fs/cgroup/unified/kubepods/burstable/pod{self.redis_uid}"
        out = self.nodes.run("node-b", f"cat /proc/uptime {group}/cpu.pressure {group}/io.pressure")
        lines = out.splitlines()
        totals = [int(line.rsplit("total=", 1)[1]) / 1e6 for line in lines if line.startswith("some ")]
        return {"at": float(lines[0].split()[0]), "cpu": totals[0], "io": totals[1]}

    def io_limit(self) -> float:
        """node-b's guard's offline I/O limit now, share of the offline rate when first limited."""
        text = self.nodes.run("node-b", f"curl -fsS {METRICS}")
        found = re.search(r'^mco_guard_offline_limit_ratio\{resource="io"\} (\S+)$', text, re.M)
        return float(found.group(1)) if found else float("nan")

    def guard_everything(self) -> None:
        """node-b's guard limits CPU, memory and I/O (the collector's default; the scenario's
        inventory limits CPU only, for its own checks)."""
        every = '  resources: ["cpu", "memory", "io"]'  # under guard: in the role's collector.yaml
        self.nodes.run(
            "node-b",
            f"sed -i 's/^  resources: .*/{every}/' /etc/mco/collector.yaml"
            f" && grep -qxF '{every}' /etc/mco/collector.yaml && systemctl restart mco-collector",
        )

    def collector(self, state: str) -> None:
        self.nodes.run("node-b", f"systemctl {state} mco-collector")
        if state == "start":  # serving again, with the analyzer's list of node-b's pods
            wait_until(self.names_online_pod, "node-b's collector to name the online pod", 60, every=1)

    def names_online_pod(self) -> bool:
        try:
            text = self.nodes.run("node-b", f"curl -fsS {METRICS}")
        except RuntimeError:  # not serving yet
            return False
        return re.search(r'mco_guard_groups\{class="online",from="pods"\} [1-9]', text) is not None

    def watch(self, kind: str, uid: str, started: float, stop: threading.Event, out: dict[str, float]) -> None:
        """Seconds from ``started`` to the guard's first write on the antagonist's group (its CPU
        weight) and to node-b's level in the antagonist's dimension reaching Medium or High."""
        shares = f"/sys/fs/cgroup/cpu/kubepods/burstable/pod{uid}/cpu.shares"
        while not stop.is_set() and ("first_write_s" not in out or "medium_s" not in out):
            if "first_write_s" not in out:
                with contextlib.suppress(RuntimeError):
                    if self.nodes.run("node-b", f"cat {shares}").strip() == "2":
                        out["first_write_s"] = time.monotonic() - started
            if "medium_s" not in out and self.cluster.level("node-b", DIMENSION[kind]) in ("Medium", "High"):
                out["medium_s"] = time.monotonic() - started
            stop.wait(0.5)

    def newcomers(self, kind: str, _uid: str, started: float, stop: threading.Event, out: dict[str, float]) -> None:
        """New pods, every second while the antagonist runs: an online replica for MCO's
        kube-scheduler and two batch pods for Volcano, one sensitive to the antagonist's dimension
        and one to another, all preferring node-b. Seconds from ``started`` to the first replica
        and the first batch pod of the dimension placed on node-a; how many of each were submitted
        while node-b was High and node-a None (overall for the replicas, which name no dimension;
        in the dimension for the batch pods) and how many of those went to node-b; the share of
        the other dimension's batch pods placed on node-b (steering by dimension leaves them there
        unless the node is under hard pressure)."""
        pause, dimension = self.image["pause-image"], DIMENSION[kind]
        counts = dict.fromkeys(
            ("replicas_while_high", "replicas_on_high_node", "batch_while_high", "batch_on_high_node"), 0.0
        )
        other_on_b = sent = 0
        for i in range(REPLICAS):
            if stop.is_set():
                break
            levels = self.cluster.levels()
            self.cluster.replica(f"replica-{i}", pause)
            self.cluster.batch(f"batch-{i}", pause, dimension)
            self.cluster.batch(f"other-{i}", pause, OTHER[kind])
            for name, pod, high in (
                ("replicas", f"replica-{i}", high_beside_none(levels)),
                ("batch", f"batch-{i}", high_beside_none(levels, dimension)),
            ):
                node = self.cluster.bound(pod)
                counts[f"{name}_while_high"] += high
                counts[f"{name}_on_high_node"] += high and node == "node-b"
                steered = "steered_s" if name == "replicas" else "batch_steered_s"
                if node == "node-a" and steered not in out:
                    out[steered] = time.monotonic() - started
            other_on_b += self.cluster.bound(f"other-{i}") == "node-b"
            sent += 1
            stop.wait(1.0)
        out |= counts
        out["other_dim_on_node_b"] = other_on_b / max(sent, 1)

    def control(self, kind: str) -> dict[str, float]:
        """Right after the calm condition, with an idle pod in the antagonist's place (the same
        CPU request, so the schedulers' resource scores are as in its rounds): the share of three
        new online replicas and of three batch pods sensitive to the dimension placed on node-b
        (the preferences hold on a calm node: 1.0 = all of them)."""
        self.cluster.pod("idle", self.image["pause-image"], [], cls="offline", cpu="1")
        self.cluster.wait_running("idle")
        try:
            for i in range(3):
                self.cluster.replica(f"control-{i}", self.image["pause-image"])
                self.cluster.batch(f"control-batch-{i}", self.image["pause-image"], DIMENSION[kind])
            replicas = [self.cluster.bound(f"control-{i}") for i in range(3)]
            batches = [self.cluster.bound(f"control-batch-{i}") for i in range(3)]
        finally:
            self.cluster.delete_newcomers()
            self.cluster.delete("idle")
        return {
            "replicas_on_node_b": replicas.count("node-b") / len(replicas),
            "batch_on_node_b": batches.count("node-b") / len(batches),
        }

    def settle(self, kind: str) -> float:
        """Seconds until node-b's level in the antagonist's dimension is None and the redis pod
        has not stalled on its resource for a while (its PSI some avg10 under 2 %; at most 90 s),
        so that no condition starts in the one before it (its pods' ends, the guard's limits)."""
        self.collector("start")
        started = time.monotonic()
        resource = "io" if kind == "disk" else "cpu"
        pressure = f"/sys/fs/cgroup/unified/kubepods/burstable/pod{self.redis_uid}/{resource}.pressure"
        while time.monotonic() - started < 90:
            avg10 = float(self.nodes.run("node-b", f"cat {pressure}").split()[1].removeprefix("avg10="))
            if avg10 < 2 and self.cluster.level("node-b", DIMENSION[kind]) == "None":
                break
            time.sleep(1)
        return time.monotonic() - started

    def antagonist(self, kind: str, seconds: float) -> str:
        """The antagonist pod on node-b, placed by Volcano, running; its uid."""
        args = [*STRESSORS[kind], "--timeout", f"{int(seconds)}s", "--metrics-brief"]
        scratch = "/scratch" if kind == "disk" else ""
        image = self.image["stress-ng-image"]
        self.cluster.pod("antagonist", image, args, cls="offline", cpu="1", scratch=scratch, scheduler="volcano")
        uid: str = self.cluster.wait_running("antagonist").metadata.uid
        return uid

    def round(self, kind: str, mode: str) -> dict[str, float]:
        settled = {"settle_s": self.settle(kind)}
        if mode == "no antagonist":
            return {**self.drive(kind), **settled}
        if mode == "guard off":
            self.collector("stop")
        antagonist = mode != NEWCOMERS_ONLY
        newcomers = mode in (NEWCOMERS_ONLY, "guard + scheduler")
        seconds = self.args.seconds + WARMUP_S + 2
        uid = self.antagonist(kind, seconds) if antagonist else ""
        started = time.monotonic()
        times: dict[str, float] = {}
        stop = threading.Event()
        jobs: list[Callable[[str, str, float, threading.Event, dict[str, float]], None]] = []
        jobs += [self.watch] if antagonist and mode != "guard off" else []
        jobs += [self.newcomers] if newcomers else []
        threads = [threading.Thread(target=job, args=(kind, uid, started, stop, times)) for job in jobs]
        for thread in threads:
            thread.start()
        try:
            figures = self.drive(kind)
            if antagonist and mode != "guard off" and kind == "disk":
                figures["io_limit"] = self.io_limit()
            if antagonist:
                figures["offline_ops_s"] = bogo_ops_per_s(self.cluster.wait_ended("antagonist", seconds + 120))
        finally:
            stop.set()
            for thread in threads:
                thread.join()
            if antagonist:
                self.cluster.delete("antagonist")
            if newcomers:
                self.cluster.delete_newcomers()
        return {**figures, **times, **settled}


def median_text(values: list[float]) -> str:
    return f"{statistics.median(values):9.2f} [{min(values):.2f}-{max(values):.2f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per condition")
    parser.add_argument("--rate", type=float, default=1000.0, help="online PINGs per second")
    parser.add_argument("--disk-rate", type=float, default=300.0, help="online SETs per second in disk rounds")
    parser.add_argument("--antagonists", default="cpu,disk", help="any of cpu, cache, disk")
    parser.add_argument("--reuse", action="store_true", help="the scenario's nodes are converged already")
    parser.add_argument("--keep", action="store_true", help="leave the nodes up afterwards")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("run as root (booted test nodes)", file=sys.stderr)
        return 2
    kinds = args.antagonists.split(",")
    if unknown := set(kinds) - set(STRESSORS):
        print(f"unknown antagonist(s) {sorted(unknown)}; known: {', '.join(STRESSORS)}", file=sys.stderr)
        return 2
    if not args.reuse:
        for step in ("destroy", "create", "prepare", "converge"):
            molecule(step)
    bed = bed_name()
    state = Path(os.environ.get("MCO_TESTBED_STATE") or "/run/mco-testbed")
    cluster = Cluster(state / bed / "kubeconfig-host")
    bench = Bench(cluster, Nodes(bed), args)
    results: dict[str, list[dict[str, float]]] = {}
    try:
        cluster.reset()
        bench.guard_everything()
        for kind in kinds:
            bench.online(kind)
            for r in range(args.rounds):
                for mode in CONDITIONS if r % 2 == 0 else [CONDITIONS[0], *reversed(CONDITIONS[1:])]:
                    key = f"{kind}: {mode}"
                    got = bench.round(kind, mode)
                    if mode == "no antagonist":
                        got |= bench.control(kind)
                    results.setdefault(key, []).append(got)
                    print(f"round {r + 1} {key:22} " + "  ".join(f"{k} {v:.2f}" for k, v in got.items()), flush=True)
        bench.collector("start")
    finally:
        if not args.keep:
            molecule("destroy")
    print(f"\n== medians [min-max] of {args.rounds} rounds, {args.seconds:g} s each ==")
    for key, rounds in results.items():
        names = [k for k in rounds[0] if all(k in r for r in rounds)]
        print(f"{key:22} " + "  ".join(f"{k} {median_text([r[k] for r in rounds])}" for k in names))
    for kind in kinds:
        p99 = {m: statistics.median(r["p99_ms"] for r in results[f"{kind}: {m}"]) for m in CONDITIONS}
        ops = {m: statistics.median(r["offline_ops_s"] for r in results[f"{kind}: {m}"]) for m in CONDITIONS[2:]}
        kept = ops["guard on"] / ops["guard off"]
        steered = results[f"{kind}: guard + scheduler"]
        high = {
            name: (
                sum(r.get(f"{name}_on_high_node", 0) for r in steered),
                sum(r.get(f"{name}_while_high", 0) for r in steered),
            )
            for name in ("replicas", "batch")
        }
        print(
            f"{kind}: p99 guard on / no antagonist = {p99['guard on'] / p99['no antagonist']:.2f} (target <= 1.3); "
            f"guard + scheduler / newcomers only = {p99['guard + scheduler'] / p99[NEWCOMERS_ONLY]:.2f}; "
            f"guard off / no antagonist = {p99['guard off'] / p99['no antagonist']:.2f}; "
            f"offline throughput on / off = {kept:.2f} (target >= 0.5); "
            f"new pods placed on node-b while it was High and node-a None: online replicas "
            f"{high['replicas'][0]:g} of {high['replicas'][1]:g} (target 0), "
            f"batch pods sensitive to {DIMENSION[kind]} {high['batch'][0]:g} of {high['batch'][1]:g}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
