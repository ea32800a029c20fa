"""The image-resolution activity: pins each image reference a rollout generation runs (its
packages', the agent's) to the digest its registry serves at the generation's start, so the
result, recorded in the workflow's history, is what every stage Job of the generation runs; and,
when the policy asks (``imageSignatures``), checks that each package image's digest carries a
cosign signature by one of the policy's keys before any node starts.

Thin: one ``Registry.resolve`` per reference (none for a reference given by digest), one
signature fetch per checked image, the keys read from their Secret at each call, the verdict
``fleetwright.signatures``'s. Errors are the taxonomy's: an unreachable registry is retryable; no
such manifest, or (``enforce``) a signature that does not verify, is permanent and names the
image, digest and reason; a keys Secret that is missing or holds no usable key is retryable
(``SignatureKeysUnavailable``), since fixing the Secret changes no spec a refusal would wait for.
With pinning off (the worker's ``image_pinning`` setting) and no signature policy, every reference
is returned as it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Protocol

from temporalio import activity

from fleetwright.activities.errors import temporal_errors
from fleetwright.activities.payloads import NAMES, ResolvedImages, ResolveImagesRequest, SignatureCheck
from fleetwright.errors import NotFoundError, PermanentError, RetryableError
from fleetwright.registry import parse_reference
from fleetwright.signatures import ImageSignatureError, NamedKey, SignatureLayer, load_keys, verify

Keys = Callable[[str, str], Mapping[str, str]]
"""(namespace, Secret name) -> the Secret's entries, decoded."""


class SignatureKeysUnavailableError(RetryableError):
    """The policy's keys Secret is missing or holds no usable public key: the rollout waits,
    naming it, until someone fixes the Secret."""

    reason = "SignatureKeysUnavailable"


class Resolver(Protocol):
    def resolve(self, reference: str) -> str: ...

    def signatures(self, pinned: str) -> tuple[SignatureLayer, ...]: ...


def _no_keys(namespace: str, name: str) -> Mapping[str, str]:
    raise SignatureKeysUnavailableError(f"secret {namespace}/{name}: this worker reads no Secrets")


class ImageResolver:
    def __init__(self, registry: Resolver, keys: Keys = _no_keys) -> None:
        self._registry = registry
        self._keys = keys

    @activity.defn(name=NAMES.RESOLVE_IMAGES)
    @temporal_errors
    async def resolve_images(self, request: ResolveImagesRequest) -> ResolvedImages:
        resolved = await asyncio.gather(
            *(asyncio.to_thread(self._registry.resolve, ref) for ref in request.references)
        )
        pinned = dict(zip(request.references, resolved, strict=True))
        if request.signatures is None:
            return ResolvedImages(pinned=pinned)
        return ResolvedImages(pinned=pinned, warnings=await self._check(request.signatures, pinned))

    async def _check(self, check: SignatureCheck, pinned: Mapping[str, str]) -> dict[str, str]:
        """reference -> why it fails the check; raises instead in ``enforce`` mode."""
        keys = await asyncio.to_thread(self._load_keys, check)
        verdicts = await asyncio.gather(
            *(asyncio.to_thread(self._verdict, ref, pinned[ref], keys) for ref in check.references)
        )
        failed = {ref: why for ref, why in zip(check.references, verdicts, strict=True) if why}
        if failed and check.mode == "enforce":
            raise ImageSignatureError("; ".join(f"{ref}: {why}" for ref, why in failed.items()))
        return failed

    def _load_keys(self, check: SignatureCheck) -> tuple[NamedKey, ...]:
        source = f"secret {check.namespace}/{check.secret}"
        try:
            return load_keys(self._keys(check.namespace, check.secret), source)
        except (NotFoundError, PermanentError) as error:
            raise SignatureKeysUnavailableError(f"imageSignatures.keysSecret: {error.message}") from None

    def _verdict(self, reference: str, pinned: str, keys: tuple[NamedKey, ...]) -> str:
        """Empty when ``pinned`` carries a signature by one of ``keys``; else why not."""
        digest = parse_reference(pinned).digest or ""
        try:
            verify(digest, self._registry.signatures(pinned), keys)
        except ImageSignatureError as error:
            return error.message
        return ""
