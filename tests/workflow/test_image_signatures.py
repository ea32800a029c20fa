"""Signed package images (a policy's ``imageSignatures``): checked when a generation's images are
resolved, before any node starts. ``enforce`` refuses a generation whose package image has no
signature by the policy's keys over its digest (Halted, naming image, digest and reason, nothing
cordoned, no stage); ``warn`` rolls out and shows the image; a good signature rolls out even with
``image_pinning`` off, on the digest it verified; a missing keys Secret holds the rollout, named,
until it exists."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client

from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.imagesignatures import ImageSignatures
from fleetwright.local import examples
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.payloads import RolloutInput
from tests.support.rollouts import start
from tests.support.signing import PrivateKey, ecdsa_key, layer, public_pem
from tests.support.waiting import until_phase, until_progress
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow

SETTINGS = EngineSettings(observe_interval_seconds=1, search_attributes=False)
TUNING = "ghcr.io/fleetwright/packages/tuning:1.0.0"
SECRET = "image-keys"


def _policy(mode: str) -> DeploymentPolicy:
    policy = examples.policy(max_unavailable=3)
    signatures = ImageSignatures.model_validate({"mode": mode, "keysSecret": SECRET})
    return policy.model_copy(update={"spec": policy.spec.model_copy(update={"image_signatures": signatures})})


def _fleet(*, keys: bool = True) -> tuple[FakeFleet, PrivateKey]:
    """Two nodes; the Secret holds one key when ``keys``. Returns the fleet and the signing key."""
    fleet = FakeFleet(size=2)
    key = ecdsa_key()
    if keys:
        fleet.secrets[f"{SETTINGS.package_namespace}/{SECRET}"] = {"cosign.pub": public_pem(key)}
    return fleet, key


def _rollout(mode: str) -> RolloutInput:
    return RolloutInput(
        profile=examples.profile(name=f"sig-{uuid.uuid4().hex[:8]}"), policy=_policy(mode), settings=SETTINGS
    )


async def _refused(client: Client, fleet: FakeFleet) -> str:
    """Run an ``enforce`` rollout on ``fleet`` until its generation is refused (Halted), check that
    no node started, and return the refusal."""
    handle, queue = await start(client, fleet, _rollout("enforce"))
    async with build_worker(client, fleet.activities(), task_queue=queue):
        refused = await until_progress(handle, lambda p: p.phase == "Halted", "the generation refused")
    assert not fleet.stage_requests
    assert not fleet.cordoned()
    return refused.message


async def test_enforce_refuses_an_unsigned_image_before_any_node_starts(client: Client) -> None:
    fleet, _ = _fleet()
    digest = fleet.registry.push(TUNING, "an unsigned build")
    assert await _refused(client, fleet) == (
        f"ImageSignatureRefused: {TUNING}: {digest}: no cosign signature "
        f"({digest.replace(':', '-')}.sig has none)"
    )


async def test_enforce_refuses_a_signature_by_another_key_or_over_another_digest(client: Client) -> None:
    fleet, key = _fleet()
    other_digest = fleet.registry.push("ghcr.io/fleetwright/packages/other:1.0.0", "another image")
    digest = fleet.registry.push(TUNING, "a build")
    fleet.registry.signed[digest] = (layer(ecdsa_key(), digest), layer(key, other_digest))
    assert await _refused(client, fleet) == (
        f"ImageSignatureRefused: {TUNING}: {digest}: the signature by a trusted key is over "
        f"{other_digest}, not this digest"
    )


async def test_a_signed_image_rolls_out_on_the_digest_it_verified_with_pinning_off(client: Client) -> None:
    fleet, key = _fleet()
    digest = fleet.registry.push(TUNING, "a signed build")
    fleet.registry.signed[digest] = (layer(key, digest),)
    handle, queue = await start(client, fleet, _rollout("enforce"))
    async with build_worker(client, fleet.activities(), task_queue=queue):
        done = await until_phase(handle, "Complete", "Halted", within=60)
    assert done.phase == "Complete", done
    assert done.images[TUNING].endswith(f"@{digest}")
    assert done.image_warnings == {}
    tuning = {i for i in fleet.stage_images() if "/tuning" in i}
    assert tuning == {f"{TUNING.rsplit(':', 1)[0]}@{digest}"}


async def test_warn_rolls_out_an_unsigned_image_and_shows_why(client: Client) -> None:
    fleet, _ = _fleet()
    digest = fleet.registry.push(TUNING, "an unsigned build")
    handle, queue = await start(client, fleet, _rollout("warn"))
    async with build_worker(client, fleet.activities(), task_queue=queue):
        done = await until_phase(handle, "Complete", "Halted", within=60)
    assert done.phase == "Complete", done
    assert done.image_warnings == {
        TUNING: f"{digest}: no cosign signature ({digest.replace(':', '-')}.sig has none)"
    }
    assert fleet.stage_requests


async def test_a_missing_keys_secret_holds_the_rollout_named_until_it_exists(client: Client) -> None:
    fleet, key = _fleet(keys=False)
    digest = fleet.registry.push(TUNING, "a signed build")
    fleet.registry.signed[digest] = (layer(key, digest),)
    handle, queue = await start(client, fleet, _rollout("enforce"))
    async with build_worker(client, fleet.activities(), task_queue=queue):
        waiting = await until_progress(
            handle, lambda p: p.message.startswith("SignatureKeysUnavailable: "), "the missing Secret shown"
        )
        assert waiting.phase == "Waiting"
        assert f"imageSignatures.keysSecret: secret {SETTINGS.package_namespace}/{SECRET} does not exist" in (
            waiting.message
        )
        assert not fleet.cordoned()
        fleet.secrets[f"{SETTINGS.package_namespace}/{SECRET}"] = {"cosign.pub": public_pem(key)}
        done = await until_phase(handle, "Complete", "Halted", within=60)
    assert done.phase == "Complete", done
