"""Signed package images against the real local registry, signed by the real cosign: a policy's
``imageSignatures`` checks each package image's signature over the digest its generation resolved,
before any node is touched. An image signed by either key of a rotation rolls out, every Job on
that digest; an unsigned image, one signed by another key, and one carrying a signature copied
from another digest are each refused (Halted, the NodeProfile's condition naming image, digest
and reason) with no node cordoned and no Job created; ``warn`` rolls out and records why."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from fleetwright.api.imagesignatures import ImageSignatures
from fleetwright.controller.profilestatus import Inputs, derive
from fleetwright.local import examples
from fleetwright.local.ociregistry import LocalRegistry
from fleetwright.registry import RegistryAccess
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import rollout_workflow_id
from fleetwright.workflows.payloads import Progress, RolloutInput
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.cosign import Cosign, keys_secret
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
from tests.support.waiting import until_phase

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]

PACKAGES = EngineSettings().package_namespace


@dataclass
class Signed:
    """One test's image, keys and cluster: what a rollout of it needs."""

    cluster: ClusterUnderTest
    client: Client
    registry: LocalRegistry
    cosign: Cosign
    tmp: Path

    def push(self, repository: str, content: bytes, tag: str = "1.0.0") -> str:
        archive = write_archive(self.tmp / f"{unique('img')}.tar", {"content": content})
        return self.registry.push(archive, repository, tag)

    async def rollout(self, repository: str, mode: str, secret: str) -> tuple[Progress, dict[str, set[str]]]:
        """Roll ``repository:1.0.0`` out to one node under ``mode``; the progress it ends in (or
        is refused with) and every Job's images."""
        agent = await asyncio.to_thread(self.push, "fleetwright/agent", b"agent")
        nodes = await asyncio.to_thread(self.cluster.add_nodes, 1)
        group = unique("g")
        await asyncio.to_thread(label_nodes, self.cluster, nodes, f"{GROUP_LABEL}={group}")
        profile = examples.profile(unique("sig"), selector={GROUP_LABEL: group}, interrupt=None)
        package = profile.spec.packages[0].model_copy(update={"image": f"{self.registry.host}/{repository}"})
        profile = profile.model_copy(update={"spec": profile.spec.model_copy(update={"packages": [package]})})
        policy = examples.policy(max_unavailable=1)
        check = ImageSignatures.model_validate({"mode": mode, "keysSecret": secret})
        policy = policy.model_copy(
            update={"spec": policy.spec.model_copy(update={"image_signatures": check})}
        )
        # image_pinning stays off: a signature policy pins its own rollouts.
        settings = EngineSettings(
            observe_interval_seconds=2,
            ended_check_seconds=2,
            stage_pod_annotations=FAST_PODS,
            stage_backoff_limit=0,
            agent_image=f"{self.registry.host}/fleetwright/agent@{agent}",
        )
        access = RegistryAccess(ca_file=str(self.registry.ca_file), timeout_seconds=5)
        rollout = RolloutInput(profile=profile, policy=policy, settings=settings)
        async with engine_worker(self.cluster, self.client, "sig", registry=access) as queue:
            with simulated_kubelet(self.cluster):
                handle: WorkflowHandle[RolloutWorkflow, Progress] = await self.client.start_workflow(
                    RolloutWorkflow.run,
                    rollout,
                    id=rollout_workflow_id(profile.metadata.name),
                    task_queue=queue,
                )
                done = await until_phase(handle, "Complete", "Halted", within=180)
                if done.phase != "Complete":
                    await handle.terminate("test done")
        cordoned = [n for n in nodes if kubectl_json(self.cluster, "node", n)["spec"].get("unschedulable")]
        assert done.phase != "Halted" or cordoned == [], cordoned
        return done, _job_images(self.cluster, profile.metadata.name)


def _job_images(cluster: ClusterUnderTest, profile: str) -> dict[str, set[str]]:
    jobs: list[dict[str, Any]] = kubectl_json(
        cluster, "jobs", "-n", PACKAGES, "-l", f"fleetwright.io/profile={profile}"
    )["items"]
    images = {}
    for job in jobs:
        pod = job["spec"]["template"]["spec"]
        images[job["metadata"]["name"]] = {
            c["image"] for c in pod.get("initContainers", []) + pod["containers"]
        }
    return images


@pytest.fixture
def signed(
    cluster: ClusterUnderTest, temporal_client: Client, oci_registry: LocalRegistry, tmp_path: Path
) -> Signed:
    return Signed(cluster, temporal_client, oci_registry, Cosign(oci_registry, tmp_path), tmp_path)


async def test_an_image_signed_by_either_key_of_a_rotation_rolls_out_on_its_digest(signed: Signed) -> None:
    old, new = signed.cosign.key_pair("old"), signed.cosign.key_pair("new")
    secret = unique("keys")
    await asyncio.to_thread(keys_secret, signed.cluster, PACKAGES, secret, old, new)
    repository = f"pkg/{unique('signed')}"
    digest = await asyncio.to_thread(signed.push, repository, b"signed with the old key")
    await asyncio.to_thread(signed.cosign.sign, old, f"{signed.registry.host}/{repository}@{digest}")
    done, jobs = await signed.rollout(repository, "enforce", secret)
    assert done.phase == "Complete", done
    assert done.image_warnings == {}
    package = f"{signed.registry.host}/{repository}@{digest}"
    assert jobs
    assert all(package in images for images in jobs.values()), jobs


@pytest.mark.parametrize("how", ["unsigned", "another-key", "copied-from-another-digest"])
async def test_an_image_without_a_valid_signature_is_refused_before_any_cordon(
    signed: Signed, how: str
) -> None:
    trusted, other = signed.cosign.key_pair("trusted"), signed.cosign.key_pair("other")
    secret = unique("keys")
    await asyncio.to_thread(keys_secret, signed.cluster, PACKAGES, secret, trusted)
    repository = f"pkg/{unique(how[:8])}"
    digest = await asyncio.to_thread(signed.push, repository, how.encode())
    pinned = f"{signed.registry.host}/{repository}@{digest}"
    if how == "another-key":
        await asyncio.to_thread(signed.cosign.sign, other, pinned)
        why = "no signature verifies under the policy's keys (trusted.pub)"
    elif how == "copied-from-another-digest":
        # an earlier image of this repository, signed; then its signature put on this digest
        earlier = await asyncio.to_thread(signed.push, repository, b"another image", "0.9.0")
        await asyncio.to_thread(signed.cosign.sign, trusted, f"{signed.registry.host}/{repository}@{earlier}")
        await asyncio.to_thread(signed.cosign.copy_signature, repository, earlier, digest)
        why = f"the signature by a trusted key is over {earlier}, not this digest"
    else:
        why = f"no cosign signature ({digest.replace(':', '-')}.sig has none)"
    done, jobs = await signed.rollout(repository, "enforce", secret)
    reference = f"{signed.registry.host}/{repository}:1.0.0"
    assert done.phase == "Halted", done
    assert done.message == f"ImageSignatureRefused: {reference}: {digest}: {why}"
    assert jobs == {}
    status = derive(Inputs(1, "w", "careful", done), None, datetime.now(UTC))
    progressing = next(c for c in status.conditions if c.type == "Progressing")
    assert progressing.reason == "RolloutHalted"
    assert f"{reference}: {digest}: {why}" in progressing.message


async def test_warn_rolls_an_unsigned_image_out_and_records_why(signed: Signed) -> None:
    trusted = signed.cosign.key_pair("trusted")
    secret = unique("keys")
    await asyncio.to_thread(keys_secret, signed.cluster, PACKAGES, secret, trusted)
    repository = f"pkg/{unique('warn')}"
    digest = await asyncio.to_thread(signed.push, repository, b"unsigned, warned")
    done, jobs = await signed.rollout(repository, "warn", secret)
    assert done.phase == "Complete", done
    reference = f"{signed.registry.host}/{repository}:1.0.0"
    assert done.image_warnings == {
        reference: f"{digest}: no cosign signature ({digest.replace(':', '-')}.sig has none)"
    }
    assert jobs
    assert all(f"{signed.registry.host}/{repository}@{digest}" in i for i in jobs.values())
