"""A NodeProfile's package, drain and scheduling settings, end to end on the real control plane:
each setting shows where it takes effect (the stage Jobs the apiserver accepted, the pods the drain
removed, the node a protected pod held), through the real worker and workflows."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from temporalio.client import Client

from fleetwright.api.common import API_VERSION
from fleetwright.api.keys import condition_type
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.local import examples
from fleetwright.planner.node.packages import digest
from fleetwright.planner.node.state import read_profile_state
from fleetwright.workflows.ids import rollout_workflow_id
from fleetwright.workflows.payloads import RolloutInput, SpecChange
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.integration.test_rollout_engine import group, jobs_of, settings
from tests.support.engine import kubectl_json, simulated_kubelet, unique
from tests.support.nodeactivities import pod
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL
from tests.support.waiting import until_phase, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]

IMAGE = "ghcr.io/fleetwright/packages/tuning"
DIGEST = "sha256:" + "ab" * 32
PROTECT = "fleetwright-test/protect"
NEW_SYSCTL = "vm.swappiness=1\n"
SERVICES = ["containerd.service", "nvidia-persistenced.service"]
TOLERATIONS: list[dict[str, Any]] = [
    {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"},
    {
        "key": "example.com/gpu-fault",
        "operator": "Equal",
        "value": "xid",
        "effect": "NoExecute",
        "tolerationSeconds": 60,
    },
    {"key": "example.com/soft", "operator": "Exists", "effect": "PreferNoSchedule"},
    {"key": "example.com/any", "operator": "Exists", "effect": ""},
]
RESOURCES = {"cpuRequest": "100m", "cpuLimit": "1", "memoryRequest": "64Mi", "memoryLimit": "256Mi"}
ENV = [
    {"name": "SITE", "value": "lab"},
    {
        "name": "TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "tuning-token", "key": "token", "optional": True}},
    },
    {
        "name": "MODE",
        "valueFrom": {"configMapKeyRef": {"name": "tuning-mode", "key": "mode", "optional": True}},
    },
]


def rich_profile(
    name: str, group_name: str, *, generation: int, sysctl: str, remove_agent: bool
) -> NodeProfile:
    tuning = {
        "name": "tuning",
        "version": "1.0.0",
        "image": IMAGE,
        "digest": DIGEST,
        "configMap": {"sysctl.conf": sysctl},
        "interrupt": {"type": "restartAllServices"},
        # A changed sysctl.conf alone needs only two units restarted, not every service.
        "configInterrupts": [{"key": "*.conf", "interrupt": {"type": "service", "services": SERVICES}}],
        "env": ENV,
        "resources": RESOURCES,
        "stageTimeoutSeconds": 600,
    }
    agent = {
        "name": "agent",
        "version": "2.0.0",
        "image": "ghcr.io/fleetwright/packages/agent",
        "configMap": {"agent.yaml": "level: info\n"},
        "interrupt": {"type": "noop"},
        "configInterrupts": [{"key": "agent.yaml", "interrupt": {"type": "restart_all_services"}}],
        "uninstall": {"enabled": True, "apply": remove_agent},
    }
    spec = {
        "nodeSelector": {
            "matchExpressions": [{"key": GROUP_LABEL, "operator": "In", "values": [group_name]}]
        },
        "packages": [tuning, agent],
        "podNonInterruptLabels": {"matchLabels": {PROTECT: "yes"}},
        "drain": {
            "timeoutSeconds": 300,
            "gracePeriodSeconds": 7,
            "deleteEmptyDirData": False,  # an emptyDir pod holds the drain until it is gone
            "disableEviction": True,
            "force": True,  # the workload pods have no controller
            "onTimeout": "wait",
        },
        "additionalTolerations": TOLERATIONS,
        "deploymentPolicyRef": {"name": "careful"},
    }
    return NodeProfile.model_validate(
        {
            "apiVersion": API_VERSION,
            "kind": "NodeProfile",
            "metadata": {"name": name, "uid": f"uid-{name}", "generation": generation},
            "spec": spec,
        }
    )


def workload(name: str, node: str, labels: dict[str, str], *, scratch: bool = True) -> dict[str, Any]:
    """A pod pinned to ``node`` (``tests.support.nodeactivities.pod``), with local scratch space or not."""
    manifest = pod(name, node, labels=labels)
    if scratch:
        manifest["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    return manifest


def pod_exists(cluster: ClusterUnderTest, namespace: str, name: str) -> bool:
    pods = kubectl_json(cluster, "pods", "-n", namespace)["items"]
    return any(p["metadata"]["name"] == name for p in pods)


def held(cluster: ClusterUnderTest, node: str, profile: str, reason: str, saying: str = "") -> bool:
    """The node's condition for ``profile`` shows it held with ``reason``, its message ``saying``."""
    conditions = kubectl_json(cluster, "node", node)["status"].get("conditions") or []
    return any(
        c["type"] == condition_type(profile) and c["reason"] == reason and saying in c.get("message", "")
        for c in conditions
    )


def carries_only_tuning(cluster: ClusterUnderTest, nodes: list[str], profile: str) -> bool:
    """Every node records tuning at its new config, the agent uninstalled, no change pending."""
    for node in nodes:
        state = read_profile_state(kubectl_json(cluster, "node", node)["metadata"]["annotations"], profile)
        agent, tuning = state.packages.get("agent"), state.packages.get("tuning")
        if (
            tuning is None
            or tuning.pending is not None
            or tuning.config != {"sysctl.conf": digest(NEW_SYSCTL)}
        ):
            return False
        if agent is not None and (agent.version is not None or agent.pending is not None):
            return False
    return True


def pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def interrupts_of(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The interrupt each interrupt Job runs (its agent's last argument, base64 JSON)."""
    return [
        json.loads(base64.b64decode(pod_spec(j)["initContainers"][0]["args"][-1]))
        for j in jobs
        if stage_of(j)[1] == "interrupt"
    ]


def stage_of(job: dict[str, Any]) -> tuple[str, str]:
    labels = job["metadata"]["labels"]
    return labels["fleetwright.io/package"], labels["fleetwright.io/stage"]


async def test_package_drain_and_scheduling_settings_take_effect_on_the_nodes(
    cluster: ClusterUnderTest, temporal_client: Client, worker: str
) -> None:
    name, nodes = await asyncio.to_thread(group, cluster, 2)
    drained, protected = nodes
    profile_name = unique("set")
    namespace = unique("wl")
    cluster.kubectl("create", "namespace", namespace)
    # A bare pod a PodDisruptionBudget forbids evicting: only force and disableEviction together
    # let the drain remove it. A bare pod with an emptyDir, which deleteEmptyDirData false leaves
    # holding the drain until it is gone. And a pod the profile protects from interrupts.
    for manifest in (
        workload("bare", drained, {"app": "bare"}, scratch=False),
        workload("scratch", drained, {"app": "scratch"}),
    ):
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "bare"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "bare"}}},
    }
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pdb))
    guarded = workload("trainer", protected, {PROTECT: "yes"})
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(guarded))
    first = rich_profile(profile_name, name, generation=1, sysctl="vm.swappiness=10\n", remove_agent=False)
    policy = examples.policy(max_unavailable=2, steps=[{"name": "all", "batches": {"initial": 2}}])
    with simulated_kubelet(cluster):
        rollout = RolloutInput(profile=first, policy=policy, settings=settings())
        handle = await temporal_client.start_workflow(
            RolloutWorkflow.run, rollout, id=rollout_workflow_id(profile_name), task_queue=worker
        )
        await asyncio.to_thread(
            wait_for,
            lambda: held(cluster, protected, profile_name, "NonInterruptPodsRunning"),
            120.0,
            "the protected pod",
        )
        assert pod_exists(cluster, namespace, "trainer")
        cluster.kubectl("delete", "pod", "trainer", "-n", namespace, "--wait=false")
        await asyncio.to_thread(
            wait_for,
            lambda: held(
                cluster, drained, profile_name, "DrainBlocked", f"{namespace}/scratch: EmptyDirData"
            ),
            120.0,
            "the emptyDir pod",
        )
        assert pod_exists(cluster, namespace, "scratch")
        cluster.kubectl("delete", "pod", "scratch", "-n", namespace, "--wait=false")
        installed = await until_phase(handle, "Complete", "Halted", within=240)
        assert installed.phase == "Complete", installed
        assert not pod_exists(cluster, namespace, "bare")  # deleted despite its PDB
        installs = jobs_of(cluster, profile_name)
        # Generation 2: a config-only change of tuning (its configInterrupt: no restart, no drain)
        # and the agent's uninstall.
        second = rich_profile(profile_name, name, generation=2, sysctl=NEW_SYSCTL, remove_agent=True)
        await handle.signal(RolloutWorkflow.spec_changed, SpecChange(profile=second, policy=policy))
        await asyncio.to_thread(
            wait_for, lambda: carries_only_tuning(cluster, nodes, profile_name), 240.0, "gen 2"
        )
        done = await until_phase(handle, "Complete", "Halted", within=240)
        await handle.terminate("test done")
    assert done.phase == "Complete", done
    assert done.generation == 2
    jobs = jobs_of(cluster, profile_name)
    later = [j for j in jobs if j["metadata"]["name"] not in {i["metadata"]["name"] for i in installs}]
    wanted = [{k: v for k, v in t.items() if v != ""} for t in TOLERATIONS]  # the API omits empty fields
    for job in jobs:
        tolerations = pod_spec(job)["tolerations"]
        assert all(t in tolerations for t in wanted), (job["metadata"]["name"], tolerations)
    work = next(j for j in installs if stage_of(j) == ("tuning", "apply"))
    inits = {c["name"]: c for c in pod_spec(work)["initContainers"]}
    assert inits["tuning-init"]["image"] == f"{IMAGE}@{DIGEST}"  # the package, pinned by digest
    stage = inits["tuning-apply"]  # the agent running the package's apply
    assert stage["resources"] == {
        "requests": {"cpu": "100m", "memory": "64Mi"},
        "limits": {"cpu": "1", "memory": "256Mi"},
    }
    env = {e["name"]: e for e in stage["env"]}
    assert env["SITE"]["value"] == "lab"
    assert env["TOKEN"]["valueFrom"] == {
        "secretKeyRef": {"name": "tuning-token", "key": "token", "optional": True}
    }
    assert env["MODE"]["valueFrom"] == {
        "configMapKeyRef": {"name": "tuning-mode", "key": "mode", "optional": True}
    }
    # Installing reloads every service (the agent's noop needs nothing more); the config-only
    # change restarts the units its configInterrupts entry names, beside the agent's uninstall.
    assert interrupts_of(installs) == [{"type": "restart_all_services"}] * 2
    assert interrupts_of(later) == [{"type": "service_restart", "services": SERVICES}] * 2  # agent spelling
    # One interrupt Job per node serves every package that needs it (labelled with one of them).
    assert sorted(stage_of(j) for j in later if "interrupt" not in stage_of(j)[1]) == sorted(
        [("agent", "uninstall"), ("tuning", "config")] * 2
    )
    assert sum(1 for j in later if stage_of(j) == ("tuning", "post-interrupt")) == 2
