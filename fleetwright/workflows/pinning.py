"""One digest per rollout generation: before a generation's first turn, every image reference it
runs (its packages', the agent's) is resolved once by the resolve-images activity, whose result in
the history is what every node workflow of the generation gets (``pinned_packages``,
``pinned_settings``): a tag pushed again mid-rollout changes nothing for it, and a new generation
resolves again. A policy edit or a fresh pass keeps the generation's digests; they travel across
continue-as-new in ``RolloutInput.pins``. A rollback runs the digests the replaced generation
pinned.

A registry that cannot be reached holds the rollout before its turn, named in its progress
(``ImageUnresolved: <reference>: <reason>``), and is asked again on the observe interval; a
reference the registry says does not exist refuses the generation (Halted, naming the image)
until the spec changes. No node starts on an unresolved reference either way.

A policy with ``imageSignatures`` has the same activity check each package image's cosign
signature against the digest it resolved to, so a refusal (``enforce``) is one more permanent
answer, Halted before any cordon, and the warnings (``warn``) travel in the pins and show in the
progress. Such a policy pins its rollouts even with ``image_pinning`` off: a signature is checked
over a digest, and only running that digest makes the check mean anything. The check is made when
a generation's images are resolved; a policy edit mid-generation applies from the next one.

A policy's ``allowedRegistries`` is checked here too, in the workflow (pure, before each turn):
admission refuses a profile or policy that breaks it, but a rollout whose package images are
outside them anyway (a policy changed with the webhook down) is Halted, naming the images, until
a new spec, before any node starts.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from fleetwright.workflows.rolloutrun import RolloutRun

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.images import ImageResolver
    from fleetwright.activities.payloads import ResolveImagesRequest, SignatureCheck
    from fleetwright.api.nodeprofile import Package
    from fleetwright.api.validation import allows_registry
    from fleetwright.workflows.enginesettings import EngineSettings
    from fleetwright.workflows.payloads import ImagePins, Progress

PATCH = "image-digests"
# A few quick attempts per round; between rounds the rollout waits its observe interval, showing
# why, instead of hiding in an activity's retries.
RESOLVE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
RESOLVE_TIMEOUT = timedelta(minutes=2)
UNRESOLVED = "ImageUnresolved"


def used(run: RolloutRun) -> bool:
    """Whether this run pins images: with ``image_pinning`` on or a policy asking for signatures,
    every new run; a run replaying a history recorded before the marker keeps the tags it ran
    with. Off, no marker is written."""
    # No marker of its own: a policy's imageSignatures is a field no older input carries, so no
    # history recorded before it reaches this branch (docs/upgrading.md).
    if not run.settings.image_pinning and run.policy.spec.image_signatures is None:
        return False
    # patch image-digests: since 0.2; deprecate_patch in 0.3, remove in 0.4
    return workflow.patched(PATCH)


async def pin_images(run: RolloutRun) -> bool:
    """True when every reference the current generation runs is pinned; else it waited (a
    registry unreachable, a generation refused) and the loop should come back here."""
    generation = run.profile.metadata.generation or 0
    if run.pins is not None and run.pins.generation != generation:
        run.pins = ImagePins(generation=generation, pinned=_returned_to(run, run.pins.pinned))
    wanted = references(run)
    known = run.pins.pinned if run.pins is not None else {}
    missing = tuple(ref for ref in wanted if ref not in known)
    if not missing:
        return True
    if run.refused is not None and run.refused[0] == generation and not run.controls.deleting:
        await _hold(run, "Halted", run.refused[1], retry_after=None)
        return False
    try:
        resolved = await workflow.execute_activity_method(
            ImageResolver.resolve_images,
            ResolveImagesRequest(
                profile=run.profile.metadata.name,
                references=missing,
                signatures=_signature_check(run, missing),
            ),
            start_to_close_timeout=RESOLVE_TIMEOUT,
            retry_policy=RESOLVE_RETRY,
            summary=f"resolve {len(missing)} image reference(s) of generation {generation} to digests",
        )
    except ActivityError as error:
        cause = error.cause
        if not isinstance(cause, ApplicationError):
            raise
        message = f"{cause.type or UNRESOLVED}: {cause.message}"
        if cause.non_retryable and run.controls.deleting:
            # A removal must not be held by an image that is gone: its uninstall runs the
            # references as they are (a node that needs one fails its stage, naming the pull).
            run.pins = ImagePins(generation=generation, pinned={**known, **{ref: ref for ref in missing}})
            return True
        if cause.non_retryable:
            run.refused = (generation, message)
            await _hold(run, "Halted", message, retry_after=None)
        else:
            retry_after = timedelta(seconds=run.settings.observe_interval_seconds)
            await _hold(run, "Waiting", message, retry_after=retry_after)
        return False
    warnings = {**(run.pins.warnings if run.pins is not None else {}), **resolved.warnings}
    run.pins = ImagePins(generation=generation, pinned={**known, **resolved.pinned}, warnings=warnings)
    return True


def _signature_check(run: RolloutRun, missing: tuple[str, ...]) -> SignatureCheck | None:
    """What the policy's ``imageSignatures`` asks of the package images among ``missing``."""
    policy = run.policy.spec.image_signatures
    packages = {p.image_reference() for p in run.profile.spec.packages}
    checked = tuple(ref for ref in missing if ref in packages)
    if policy is None or not checked:
        return None
    return SignatureCheck(
        mode=policy.mode,
        namespace=run.settings.package_namespace,
        secret=policy.keys_secret,
        references=checked,
    )


async def registries_allowed(run: RolloutRun) -> bool:
    """True when every package image of the generation comes from the policy's
    ``allowedRegistries`` (or it sets none, or the profile is being removed); else the generation
    is held Halted until a new spec and the loop should come back here."""
    # No marker: allowedRegistries is a field no older input carries (docs/upgrading.md).
    allowed = run.policy.spec.allowed_registries
    if allowed is None or run.controls.deleting:
        return True
    outside = sorted({p.image for p in run.profile.spec.packages if not allows_registry(allowed, p.image)})
    if not outside:
        return True
    message = (
        f"ImageRegistryNotAllowed: {', '.join(outside)}: not from spec.allowedRegistries of "
        f"DeploymentPolicy {run.policy.metadata.name!r} ({', '.join(allowed)})"
    )
    await _hold(run, "Halted", message, retry_after=None)
    return False


def references(run: RolloutRun) -> tuple[str, ...]:
    """Every image the current generation runs (its packages', the agent's), each once, in order."""
    refs = [p.image_reference() for p in run.profile.spec.packages] + [run.settings.agent_image]
    return tuple(dict.fromkeys(refs))


def _returned_to(run: RolloutRun, earlier: dict[str, str]) -> dict[str, str]:
    """The earlier generation's digests of the images only a rollback of the new one runs (the
    replaced profile's): a rollback returns the nodes to the bytes they ran, never resolved again.
    An image the earlier generation did not pin stays a tag."""
    if run.previous is None:
        return {}
    current = set(references(run))
    replaced = {p.image_reference() for p in run.previous.spec.packages} - current
    return {ref: pinned for ref, pinned in earlier.items() if ref in replaced}


def pinned_packages(run: RolloutRun, packages: tuple[Package, ...]) -> tuple[Package, ...]:
    """``packages`` with the generation's digests (unchanged without pins)."""
    if run.pins is None:
        return packages
    return tuple(_pinned_package(run.pins, p) for p in packages)


def _pinned_package(pins: ImagePins, package: Package) -> Package:
    _, at, digest = pins.pinned.get(package.image_reference(), "").partition("@")
    return package.model_copy(update={"digest": digest}) if at and not package.digest else package


def pinned_settings(run: RolloutRun) -> EngineSettings:
    """The engine settings a node workflow gets: the agent image by the generation's digest."""
    if run.pins is None:
        return run.settings
    agent = run.pins.pinned.get(run.settings.agent_image, run.settings.agent_image)
    return run.settings.model_copy(update={"agent_image": agent})


def shown(run: RolloutRun, progress: Progress) -> Progress:
    """``progress`` naming the digests the generation runs and the signatures it only warned of."""
    if run.pins is None:
        return progress
    return progress.model_copy(
        update={"images": dict(run.pins.pinned), "image_warnings": dict(run.pins.warnings)}
    )


async def _hold(run: RolloutRun, phase: str, message: str, *, retry_after: timedelta | None) -> None:
    """Show why the generation cannot start and wait for a spec change or the deletion; with
    ``retry_after``, also for a human's signal or that long, then ask the registry again."""
    assert run.state is not None
    if run.progress is not None:
        progress = run.progress.model_copy(
            update={"phase": phase, "message": message, "generation": run.profile.metadata.generation or 0}
        )
    else:
        progress = Progress(
            profile=run.profile.metadata.name,
            phase=phase,
            message=message,
            generation=run.profile.metadata.generation or 0,
            target=run.state.spec.target,
        )
    if progress != run.progress:  # a registry down for hours writes its reason once
        run.progress = progress
        workflow.upsert_memo(run.memo())
        workflow.set_current_details(f"**{phase}**: {message}")
    if retry_after is None:  # refused: only a new spec (or the deletion) changes the answer
        await workflow.wait_condition(lambda: run.new_spec is not None)
        return
    run.decide_now = False
    with contextlib.suppress(TimeoutError):
        await workflow.wait_condition(lambda: run.new_spec is not None or run.decide_now, timeout=retry_after)
