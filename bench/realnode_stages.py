"""Real stage pods against simulated ones: where a stage Job's time goes on the real node, and what
the kwok stage settings the benchmarks use make of the same Job.

It starts the local control plane with one real node (kubelet, containerd, runc; needs root) and
one kwok node, then creates the ``shellscript`` package's ``apply`` stage Job (rendered by
``fleetwright.stagejob``, the Job the engine creates) ``--runs`` times on each, one at a time, and
reads back from the API server: Job created -> pod created -> pod scheduled -> each init container's
start and finish -> the Job complete. On the real node the three init containers (the package
image's copy, the agent's ``apply`` and ``apply-check``) really run against the node's scratch host
root; the script itself is ``exit 0``, so what is measured is the pod's own cost. On the kwok node
the pod carries ``stage_pod_timing(--stage-seconds)``, as in ``bench/rollout.py``.

Kubernetes records container times in whole seconds, so per-container figures are +-1 s; the
Job-level figures are read from the Job's own timestamps (also seconds) and from this script's
clock (sub-second). Run as root:

    .venv/bin/python bench/realnode_stages.py --runs 5
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from typing import Any

from fleetwright.images import spec as image_spec
from fleetwright.local.controlplane import ClusterOptions, LocalCluster
from fleetwright.local.nodes import node_name, stage_pod_timing
from fleetwright.local.realnode import RealNode, RealNodeOptions
from fleetwright.stagejob.render import PACKAGE_NAMESPACE, StageJobSpec, config_map_name, render

PROFILE, PACKAGE, VERSION = "bench-real", "shellscript", "1.0.0"
SCRIPTS = {"apply.sh": "exit 0", "apply_check.sh": "exit 0"}


def _time(value: str | None) -> float | None:
    if not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _json(cluster: LocalCluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def _setup(cluster: LocalCluster) -> None:
    cluster.kubectl("create", "namespace", PACKAGE_NAMESPACE, check=False)
    literals = [f"--from-literal={key}={value}" for key, value in SCRIPTS.items()]
    name = config_map_name(PROFILE, PACKAGE, VERSION)
    cluster.kubectl("create", "configmap", name, "-n", PACKAGE_NAMESPACE, *literals)


def _job(node: str, run: int, host_root: str, annotations: dict[str, str], real: RealNode) -> dict[str, Any]:
    """The apply stage's Job on ``node``, with the images as the real node pulls them (its
    registry's)."""
    spec = StageJobSpec(
        profile=PROFILE,
        profile_uid=f"run{run}",
        generation=1,
        node=node,
        package=PACKAGE,
        version=VERSION,
        image=real.image(image_spec.package_ref(PACKAGE, VERSION)).repository,
        stage="apply",
        agent_image=real.image(image_spec.AGENT.ref).pinned(),
        host_root=host_root,
        config_keys=tuple(SCRIPTS),
        pod_annotations=annotations,
        backoff_limit=0,
        pass_id=f"{node}-{run}",
    )
    return render(spec)


def run_one(cluster: LocalCluster, job: dict[str, Any], timeout: float = 300) -> dict[str, float]:
    """Seconds from the Job's creation to each milestone of its one pod."""
    name = job["metadata"]["name"]
    created = time.time()
    cluster.kubectl("create", "-f", "-", input=json.dumps(job))
    deadline = created + timeout
    while True:
        state = _json(cluster, "job", name, "-n", PACKAGE_NAMESPACE)
        conditions = {c["type"]: c for c in state.get("status", {}).get("conditions", [])}
        if conditions.get("Complete", {}).get("status") == "True":
            done = time.time()
            break
        if conditions.get("Failed", {}).get("status") == "True":
            raise RuntimeError(f"stage Job {name} failed: {conditions['Failed'].get('message')}")
        if time.time() > deadline:
            raise RuntimeError(f"stage Job {name} not complete after {timeout}s")
        time.sleep(0.2)
    pods = _json(cluster, "pods", "-n", PACKAGE_NAMESPACE, "-l", f"job-name={name}")["items"]
    (pod,) = pods
    job_created = _time(state["metadata"]["creationTimestamp"]) or created
    marks = {"complete (this clock)": done - created}
    marks["pod created"] = (_time(pod["metadata"]["creationTimestamp"]) or job_created) - job_created
    for condition in pod["status"].get("conditions", []):
        at = _time(condition.get("lastTransitionTime"))
        if at is not None and condition["type"] in ("PodScheduled", "Initialized", "Ready"):
            marks[f"pod {condition['type']}"] = at - job_created
    statuses = [*(pod["status"].get("initContainerStatuses") or []), *pod["status"]["containerStatuses"]]
    for status in statuses:
        terminated = status.get("state", {}).get("terminated") or {}
        for what in ("startedAt", "finishedAt"):
            at = _time(terminated.get(what))
            if at is not None:
                marks[f"{status['name']} {what[:-2]}"] = at - job_created
    completion = _time(state["status"].get("completionTime"))
    if completion is not None:
        marks["Job completionTime"] = completion - job_created
    cluster.kubectl("delete", "job", name, "-n", PACKAGE_NAMESPACE, "--wait=false")
    return marks


def _table(title: str, runs: list[dict[str, float]]) -> None:
    print(f"\n{title} ({len(runs)} runs; seconds after the Job was created, median [min-max])")
    # By median time; ties (whole seconds) keep the order the pod reported them in.
    seen = dict.fromkeys(k for r in runs for k in r)
    keys = sorted(seen, key=lambda k: statistics.median(r[k] for r in runs if k in r))
    for key in keys:
        values = [r[key] for r in runs if key in r]
        print(f"  {key:<40} {statistics.median(values):6.1f}  [{min(values):.1f}-{max(values):.1f}]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stage-seconds", type=float, default=1.0, help="the simulated stage's time")
    args = parser.parse_args(argv)
    options = ClusterOptions(nodes=1, real_node=RealNodeOptions())
    with LocalCluster(options) as cluster:
        assert cluster.real_node is not None
        real = cluster.real_node
        print(f"cluster with a real node up in {cluster.startup_seconds:.1f}s; image pushes (s):")
        for ref, seconds in real.image_seconds.items():
            print(f"  {ref:<60} {seconds:5.1f}")
        _setup(cluster)
        real_runs, kwok_runs = [], []
        for run in range(args.runs):
            job = _job(real.options.name, run, real.host_root.path, {}, real)
            real_runs.append(run_one(cluster, job))
            simulated = _job(node_name(0), run, "/", stage_pod_timing(args.stage_seconds), real)
            kwok_runs.append(run_one(cluster, simulated))
    _table(f"real node {options.real_node and options.real_node.name}: copy + apply + apply-check", real_runs)
    _table(f"kwok node, stage_pod_timing({args.stage_seconds})", kwok_runs)
    print(f"\nreproduce: .venv/bin/python bench/realnode_stages.py --runs {args.runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
