"""Image pinning against the real local registry (docker-registry with TLS from a local CA): an image
pushed with skopeo is rolled out with every stage Job on its digest, and a tag pushed again to a
different image mid-rollout leaves every Job of that generation on the first digest. The kwok nodes
pull nothing: the Jobs' image fields are what is asserted."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from fleetwright.local import examples
from fleetwright.local.ociregistry import LocalRegistry
from fleetwright.registry import RegistryAccess
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import rollout_workflow_id
from fleetwright.workflows.payloads import RolloutInput
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.engine import (
    FAST_PODS,
    engine_worker,
    kubectl_json,
    label_nodes,
    simulated_kubelet,
    unique,
)
from tests.support.ociimages import write_archive
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL
from tests.support.waiting import until_phase, until_progress

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]

STEPS = [
    {"name": "canary", "canary": {"count": 1}},
    {"name": "gate", "approval": {}},
    {"name": "rest", "batches": {"strategy": "fixed", "initial": 3}},
]


def _job_images(cluster: ClusterUnderTest, profile: str) -> dict[str, set[str]]:
    """Job name -> every container image of its pod template."""
    jobs: list[dict[str, Any]] = kubectl_json(
        cluster, "jobs", "-n", "fleetwright-system", "-l", f"fleetwright.io/profile={profile}"
    )["items"]
    images = {}
    for job in jobs:
        pod = job["spec"]["template"]["spec"]
        containers = pod.get("initContainers", []) + pod["containers"]
        images[job["metadata"]["name"]] = {c["image"] for c in containers}
    return images


def _push(registry: LocalRegistry, tmp: Path, name: str, repository: str, tag: str, content: bytes) -> str:
    return registry.push(write_archive(tmp / f"{name}.tar", {"content": content}), repository, tag)


async def test_every_job_of_a_generation_runs_the_digest_its_start_resolved(
    cluster: ClusterUnderTest, temporal_client: Client, oci_registry: LocalRegistry, tmp_path: Path
) -> None:
    registry = oci_registry
    package = unique("pkg")
    first = await asyncio.to_thread(_push, registry, tmp_path, "first", f"pkg/{package}", "1.0.0", b"first")
    agent = await asyncio.to_thread(
        _push, registry, tmp_path, "agent", "fleetwright/agent", "0.1.0", b"agent"
    )
    nodes = await asyncio.to_thread(cluster.add_nodes, 4)
    group = unique("g")
    await asyncio.to_thread(label_nodes, cluster, nodes, f"{GROUP_LABEL}={group}")
    profile = examples.profile(unique("pin"), selector={GROUP_LABEL: group}, interrupt=None)
    image = profile.spec.packages[0].model_copy(update={"image": f"{registry.host}/pkg/{package}"})
    profile = profile.model_copy(update={"spec": profile.spec.model_copy(update={"packages": [image]})})
    settings = EngineSettings(
        observe_interval_seconds=2,
        ended_check_seconds=2,
        stage_pod_annotations=FAST_PODS,
        stage_backoff_limit=0,
        image_pinning=True,
        agent_image=f"{registry.host}/fleetwright/agent:0.1.0",
    )
    access = RegistryAccess(ca_file=str(registry.ca_file), timeout_seconds=5)
    rollout = RolloutInput(
        profile=profile, policy=examples.policy(max_unavailable=3, steps=STEPS), settings=settings
    )
    async with engine_worker(cluster, temporal_client, "pin", registry=access) as queue:
        with simulated_kubelet(cluster):
            handle = await temporal_client.start_workflow(
                RolloutWorkflow.run, rollout, id=rollout_workflow_id(profile.metadata.name), task_queue=queue
            )
            at_gate = await until_progress(
                handle, lambda p: ": gate" in p.step, "the canary done, at the gate"
            )
            canary_jobs = _job_images(cluster, profile.metadata.name)
            moved = await asyncio.to_thread(
                _push, registry, tmp_path, "second", f"pkg/{package}", "1.0.0", b"second, pushed mid-rollout"
            )
            compartment = at_gate.step.split(":")[0]
            await handle.execute_update(RolloutWorkflow.approve, f"{compartment}/gate")
            done = await until_phase(handle, "Complete", "Halted", within=180)
    assert done.phase == "Complete", done
    assert done.updated == 4
    assert moved != first  # the tag now names another image
    jobs = _job_images(cluster, profile.metadata.name)
    assert len(jobs) > len(canary_jobs) > 0  # Jobs were created before and after the push
    pinned = {f"{registry.host}/pkg/{package}@{first}", f"{registry.host}/fleetwright/agent@{agent}"}
    assert {name: images for name, images in jobs.items() if images != pinned} == {}
    assert done.images[f"{registry.host}/pkg/{package}:1.0.0"] == f"{registry.host}/pkg/{package}@{first}"
