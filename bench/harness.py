"""The benchmarks' running stack and their measurements.

``Stack`` starts the local control plane (kube-apiserver with an audit log of every write and of
every request made with the admin identity), a local Temporal server (the dev server, or
temporal-server on PostgreSQL), the CRDs, the worker and the
controller as separate processes (``bench/serve.py``) and the simulated kubelet. The measuring
helpers read CPU seconds (of each process with everything it started) and peak RSS from /proc, the apiserver's
``apiserver_request_total`` counters, who made each write from the audit log, and the Temporal
server's own counters (requests by operation, persistence calls, history tasks).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.service import RPCError

from fleetwright.api.crdgen import CRDS, rendered_files
from fleetwright.kube.client import ApiClient, from_kubeconfig
from fleetwright.local.controlplane import ClusterOptions, LocalCluster
from fleetwright.local.kubectl import create_package_namespace, wait_established
from fleetwright.local.kubelet import KUBELET_AGENT, watched_kubelet
from fleetwright.local.processes import Supervised
from fleetwright.local.temporalserver import Backend, TemporalServer, local_temporal
from fleetwright.process.settings import WorkerSettings, process_environment
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import rollout_workflow_id
from fleetwright.workflows.search import REGISTRATION

BENCH = Path(__file__).resolve().parent
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# Writes from everyone, and every request of the admin identity (fleetwright's processes, the
# bench): reads by kwok and the controller manager are counted
# by the metrics only, which keeps the log small at 10,000 nodes.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [
        # fleetwright's Node patches with their bodies, to tell cordons, state records and
        # status labels apart.
        {
            "level": "Request",
            "users": ["fleetwright-admin"],
            "verbs": ["patch"],
            "resources": [{"group": "", "resources": ["nodes", "nodes/status"]}],
        },
        # Its stage Jobs' creates with their bodies, for the node each one runs on.
        {
            "level": "Request",
            "users": ["fleetwright-admin"],
            "verbs": ["create"],
            "resources": [{"group": "batch", "resources": ["jobs"]}],
        },
        {"level": "Metadata", "verbs": sorted(WRITE_VERBS)},
        {"level": "Metadata", "users": ["fleetwright-admin"]},
        {"level": "None"},
    ],
}
_LABEL = re.compile(r'(\w+)="([^"]*)"')
_SAMPLE = re.compile(r"^(?P<name>\w+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
# The Temporal server's counters, each by the label that says what was done: client requests
# (the frontend's), calls to its database, and the history service's internal tasks.
TEMPORAL_COUNTERS = {
    "service_requests": "operation",
    "persistence_requests": "operation",
    "task_requests": "task_type",
}
_TICK = os.sysconf("SC_CLK_TCK")
# apiserver_request_total counts HTTP verbs; the audit log uses the API's verbs.
_API_VERB = {"post": "create", "put": "update"}


# kwok's workers are sized by the cluster from the node count. Simulated leases last 20 minutes
# per 1,000 nodes (renewed at a quarter of that, not every 10 s: at 1,000 nodes 10 s renewals
# were 54 % of all apiserver requests, at 10,000 nodes 1-minute renewals were ~170 writes/s, most
# of the machine, and at 1,000 nodes 1-minute renewals were still the largest kind of write, 26
# per node) and the cluster stretches the controller manager's grace period past that, so a loaded 2-core
# machine does not turn nodes NotReady mid-rollout (which fleetwright then rightly refuses to
# touch). Real nodes renew their own leases, on the control plane's own machines.
NODE_LEASE_SECONDS_PER_1000 = 1200


def node_lease_seconds(nodes: int) -> int:
    """The simulated nodes' lease: about 3 renewals per second whatever the fleet's size."""
    return max(NODE_LEASE_SECONDS_PER_1000, NODE_LEASE_SECONDS_PER_1000 * nodes // 1000)


def manifest(model: BaseModel, name: str) -> dict[str, Any]:
    """An API model as the body a user applies: its spec under ``name``, no status."""
    body: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    body.pop("status", None)
    body["metadata"] = {"name": name}
    return body


async def published_progress(client: Client, profile: str) -> dict[str, Any]:
    """The rollout's published progress (its memo), read without a worker round trip; empty
    before the controller started the rollout."""
    return await memo_progress(client, rollout_workflow_id(profile))


async def memo_progress(client: Client, workflow_id: str) -> dict[str, Any]:
    """A workflow's published progress (its memo ``progress``); empty before it started."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError:  # not started yet
        return {}
    value: dict[str, Any] = (await described.memo()).get("progress") or {}
    return value


@dataclass(frozen=True)
class PauseHandled:
    """A rollout's pause signal in its history (epoch seconds, the server's clock)."""

    signal_at: float
    """The pause signal was recorded."""
    in_effect_at: float
    """The workflow task that handled it completed: from then on no node starts."""
    starts: tuple[float, ...]
    """Every node workflow start the rollout initiated."""


async def pause_handled(client: Client, workflow_id: str) -> PauseHandled:
    """The first pause signal in a rollout's history, when it took effect, and its node starts."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    signal_at = in_effect_at = None
    starts = []
    for event in history.events:
        at = event.event_time.ToMicroseconds() / 1e6
        if (
            event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
            and event.workflow_execution_signaled_event_attributes.signal_name == "pause"
            and signal_at is None
        ):
            signal_at = at
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            if signal_at is not None and in_effect_at is None:
                in_effect_at = at
        elif event.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            starts.append(at)
    if signal_at is None or in_effect_at is None:
        raise SystemExit(f"{workflow_id}: no pause signal handled in the rollout's history")
    return PauseHandled(signal_at, in_effect_at, tuple(starts))


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class MachineBusy:
    """How busy the whole machine's cores were, sampled from /proc/stat between calls to
    ``sample``: whether a rollout was waiting on fleetwright or on the machine itself."""

    SATURATED = 0.95

    def __init__(self) -> None:
        self._last = _machine_jiffies()
        self.samples: list[float] = []

    def sample(self) -> None:
        busy, total = _machine_jiffies()
        if total > self._last[1]:
            self.samples.append((busy - self._last[0]) / (total - self._last[1]))
        self._last = (busy, total)

    def mean(self) -> float:
        return sum(self.samples) / len(self.samples) if self.samples else 0.0

    def saturated(self) -> float:
        """The fraction of samples in which every core was (nearly) busy."""
        full = sum(1 for busy in self.samples if busy >= self.SATURATED)
        return full / len(self.samples) if self.samples else 0.0

    def line(self) -> str:
        return (
            f"machine CPU:      {self.mean():.0%} busy on average; every core >= "
            f"{self.SATURATED:.0%} busy in {self.saturated():.0%} of {len(self.samples)} one-second samples"
        )


def calibrate() -> float:
    """CPU milliseconds this process needs for 20 decode-and-encode passes over a 2,000-object JSON
    list (JSON and dict churn, like the processes under test; the median round of 4 passes, x5):
    how fast the machine's cores were at the time. CPU seconds of the same
    rollout rose by a quarter from one run to the next on this shared VM; this figure, taken
    before and after, tells such a run apart from a change in the code."""
    blob = json.dumps([{"metadata": {"name": f"n{i}", "labels": {"k": str(i)}}} for i in range(2000)])
    rounds = []
    for _ in range(9):  # the median of several rounds: one round varies by a third on its own
        started = time.process_time()
        for _ in range(4):
            json.dumps(json.loads(blob))
        rounds.append((time.process_time() - started) * 1000)
    return sorted(rounds)[len(rounds) // 2] * 5


def _machine_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all cores: the first line of /proc/stat, idle and iowait idle."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def _stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state is [0], ppid [1])."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_children() -> dict[int, list[int]]:
    """pid -> its live children's pids, from one pass over /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                children.setdefault(int(_stat(int(entry.name))[1]), []).append(int(entry.name))
    return children


def cpu_seconds(pid: int, children: dict[int, list[int]] | None = None) -> float:
    """CPU seconds of a live process and everything it started: its utime + stime, its waited-for
    children's (cutime + cstime), and the same of every live descendant (PostgreSQL serves each
    connection from a child process). ``children``: a ``process_children()`` reading to reuse."""
    children = process_children() if children is None else children
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = _stat(current)
        except OSError:
            if current == pid:
                raise
            continue  # a descendant that just exited: its parent's cutime has it
        total += sum(int(value) for value in fields[11:15])
        todo += children.get(current, [])
    return total / _TICK


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Stack:
    """Control plane + Temporal + worker + controller + simulated kubelet, in ``rundir``."""

    nodes: int
    engine: EngineSettings
    rundir: Path
    activity_slots: int = 200
    """The worker's ``max_concurrent_activities``: a rollout wider than it queues its stages."""
    split_worker: bool = False
    """Workflows and activities in two worker processes (``worker_role``) instead of one."""
    backend: Backend = Backend.DEV
    """The Temporal server: the dev server (sqlite) or temporal-server on PostgreSQL."""
    prometheus_url: str = ""
    """The Prometheus the worker's health checks query (``bench/health_gate.py``)."""
    cluster: LocalCluster = field(init=False)
    temporal: TemporalServer = field(init=False)
    processes: dict[str, Supervised] = field(init=False, default_factory=dict)
    _exit: contextlib.ExitStack = field(init=False, default_factory=contextlib.ExitStack)

    @property
    def audit_log(self) -> Path:
        return self.rundir / "audit.log"

    def __enter__(self) -> Stack:
        try:
            self._start()
        except BaseException:
            self._exit.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._exit.close()

    def _start(self) -> None:
        self.rundir.mkdir(parents=True, exist_ok=True)
        policy = self.rundir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY))
        options = ClusterOptions(
            nodes=self.nodes,
            workdir=self.rundir / "cluster",
            apiserver_args=(
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=0",
            ),
            node_lease_seconds=node_lease_seconds(self.nodes),
            startup_timeout=600,
        )
        self.cluster = self._exit.enter_context(LocalCluster(options))
        self.temporal = self._exit.enter_context(
            local_temporal(self.backend, search_attributes=REGISTRATION, workdir=self.rundir / "temporal")
        )
        crds = list(rendered_files().values())
        self.cluster.kubectl("apply", "-f", "-", input="---\n".join(crds))
        wait_established(self.cluster.kubectl, [spec.name for spec in CRDS])
        # What the chart creates: the worker creates no namespace.
        create_package_namespace(self.cluster.kubectl, self.engine.package_namespace)
        settings = WorkerSettings(
            temporal_address=self.temporal.address,
            temporal_namespace=self.temporal.namespace,
            kubeconfig=self.cluster.kubeconfig,
            engine=self.engine,
            max_concurrent_activities=self.activity_slots,
            prometheus_url=self.prometheus_url,
        )
        settings_path = self.rundir / "settings.json"
        settings_path.write_text(settings.model_dump_json())
        env = process_environment(settings_path)
        for name, role, worker_role in self._roles():
            argv = [sys.executable, str(BENCH / "serve.py"), role]
            process_env = {**env, "FLEETWRIGHT_WORKER_ROLE": worker_role}
            process = Supervised(name, argv, self.rundir / f"{name}.log", env=process_env)
            process.start()
            self._exit.callback(process.stop)
            self.processes[name] = process
        self._exit.enter_context(watched_kubelet(self.cluster.kubeconfig, self.cluster.kubectl))

    def _roles(self) -> list[tuple[str, str, str]]:
        """(process name, serve.py role, worker_role) of each fleetwright process."""
        workers = (
            [("worker-workflows", "workflows"), ("worker-activities", "activities")]
            if self.split_worker
            else [("worker", "all")]
        )
        return [
            *((name, "worker", role) for name, role in workers),
            ("controller", "controller", "all"),
        ]

    def api(self) -> ApiClient:
        """The bench's own client, with a User-Agent that keeps it apart from fleetwright's."""
        api = from_kubeconfig(self.cluster.kubeconfig)
        api.user_agent = "fleetwright-bench"
        return api

    def pids(self) -> dict[str, int]:
        pids = {**self.cluster.pids, **self.temporal.pids}
        for role, process in self.processes.items():
            if not process.running or process.pid is None:
                raise RuntimeError(f"the {role} process died: see {process.log_path}")
            pids[role] = process.pid
        return pids

    def python_pids(self) -> dict[str, int]:
        """fleetwright's own Python processes (the workers and the controller) by name."""
        return {name: pid for name, pid in self.pids().items() if name in self.processes}

    def cpu(self) -> dict[str, float]:
        children = process_children()
        return {name: cpu_seconds(pid, children) for name, pid in self.pids().items()}

    def request_counts(self) -> Counter[tuple[str, str]]:
        """apiserver_request_total summed over codes: (verb, resource[/subresource]) -> count."""
        text = self.cluster.kubectl("get", "--raw", "/metrics", timeout=60).stdout
        counts: Counter[tuple[str, str]] = Counter()
        for name, labels, value in prometheus_samples(text):
            if name != "apiserver_request_total":
                continue
            resource = labels.get("resource", "")
            if labels.get("subresource"):
                resource += "/" + labels["subresource"]
            verb = labels.get("verb", "").lower()
            counts[(_API_VERB.get(verb, verb), resource)] += value
        return counts

    def temporal_counts(self) -> Counter[tuple[str, str]]:
        """The Temporal server's ``TEMPORAL_COUNTERS``, summed over namespaces: (counter, what) ->
        count; the frontend's requests only (each is forwarded to history or matching too)."""
        with urllib.request.urlopen(self.temporal.metrics_url, timeout=30) as response:
            text = response.read().decode()
        counts: Counter[tuple[str, str]] = Counter()
        for name, labels, value in prometheus_samples(text):
            if name not in TEMPORAL_COUNTERS:
                continue
            if name == "service_requests" and labels.get("service_name") != "frontend":
                continue
            counts[(name, labels.get(TEMPORAL_COUNTERS[name], ""))] += value
        return counts

    def audit_offset(self) -> int:
        return self.audit_log.stat().st_size if self.audit_log.exists() else 0

    def audited_since(self, offset: int) -> list[dict[str, Any]]:
        with self.audit_log.open("rb") as log:
            log.seek(offset)
            return [json.loads(line) for line in log if line.strip()]


def prometheus_samples(text: str) -> Iterator[tuple[str, dict[str, str], int]]:
    """(metric, labels, value) of each labelled sample in a Prometheus text exposition."""
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is not None:
            yield match["name"], dict(_LABEL.findall(match["labels"])), int(float(match["value"]))


def actor(event: dict[str, Any]) -> str:
    """Who made an audited request: fleetwright's processes and the bench by User-Agent, the
    simulation's components by identity."""
    agent = str(event.get("userAgent", ""))
    user = str(event.get("user", {}).get("username", ""))
    if agent.startswith(KUBELET_AGENT):
        return "simulated kubelet (reboots)"
    if agent.startswith("fleetwright-"):
        return agent.split(" ", maxsplit=1)[0]
    if user == "kwok-controller":
        return "kwok"
    if "kube-controller-manager" in user or "kube-controller-manager" in agent:
        return "kube-controller-manager (Job controller, GC)"
    if agent.startswith("kubectl"):
        return "kubectl (bench apply)"
    return user or agent or "unknown"


def resource_of(event: dict[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    resource = str(ref.get("resource", event.get("requestURI", "?")))
    if ref.get("subresource"):
        resource += "/" + ref["subresource"]
    return resource


def audit_table(events: list[dict[str, Any]]) -> Counter[tuple[str, str, str]]:
    """(actor, verb, resource) -> requests."""
    return Counter((actor(e), e.get("verb", ""), resource_of(e)) for e in events)


def patch_shape(event: dict[str, Any]) -> str:
    """What a Node patch touches: its fields and the annotation/label keys (without the profile)."""
    body = event.get("requestObject") or {}
    parts = []
    metadata = body.get("metadata") or {}
    for kind in ("annotations", "labels"):
        keys = sorted({key.split("/")[-1].split(".")[0] for key in metadata.get(kind) or {}})
        if keys:
            parts.append(f"{kind}[{','.join(keys)}]")
    for key in sorted(body.get("spec") or {}):
        parts.append(f"spec.{key}")
    for condition in (body.get("status") or {}).get("conditions") or []:
        parts.append(f"condition[{condition.get('type')}]")
    return " ".join(parts) or "?"


def node_patches(events: list[dict[str, Any]]) -> Counter[str]:
    """fleetwright's Node patches by what they touch."""
    return Counter(
        patch_shape(e)
        for e in events
        if actor(e).startswith("fleetwright-") and e.get("verb") == "patch" and e.get("requestObject")
    )


def per_node_lines(counts: Counter[Any], nodes: int, minimum: float = 0.005) -> list[str]:
    lines = []
    for key, value in sorted(counts.items(), key=lambda kv: -kv[1]):
        if value / nodes >= minimum:
            label = " ".join(key) if isinstance(key, tuple) else str(key)
            lines.append(f"    {value / nodes:8.2f}  {label}  ({value})")
    return lines


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


def spread_lines(rows: tuple[tuple[str, list[float]], ...], width: int) -> list[str]:
    """One line per (label, seconds) row: p50, p99, min and max, labels padded to ``width``."""
    return [
        f"{label:{width}s} p50 {percentile(values, 50):6.2f} s  p99 {percentile(values, 99):6.2f} s"
        f"  (min {min(values):.2f}, max {max(values):.2f})"
        for label, values in rows
    ]


def load_line(load_start: str) -> str:
    """The machine's load average over a run: the wall times move with it."""
    return f"load average: {load_start} at start, {loadavg()} at end (2 cores shared with other work)"
