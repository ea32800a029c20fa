"""The image-resolution activity: pins each image reference a rollout generation runs (its
packages' and the agent's) to the digest its registry serves at the generation's start, so the
result, recorded in the workflow's history, is what every stage Job of the generation runs.

Thin: one ``Registry.resolve`` per reference (none for a reference given by digest); the
registry's errors are the taxonomy's (unreachable: retryable, no such manifest: permanent). With
pinning off (the worker's ``image_pinning`` setting) every reference is returned as it is.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from temporalio import activity

from fleetwright.activities.errors import temporal_errors
from fleetwright.activities.payloads import NAMES, ResolvedImages, ResolveImagesRequest


class Resolver(Protocol):
    def resolve(self, reference: str) -> str: ...


class ImageResolver:
    def __init__(self, registry: Resolver) -> None:
        self._registry = registry

    @activity.defn(name=NAMES.RESOLVE_IMAGES)
    @temporal_errors
    async def resolve_images(self, request: ResolveImagesRequest) -> ResolvedImages:
        resolved = await asyncio.gather(
            *(asyncio.to_thread(self._registry.resolve, ref) for ref in request.references)
        )
        return ResolvedImages(pinned=dict(zip(request.references, resolved, strict=True)))
