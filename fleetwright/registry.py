"""The OCI registry adapter: resolves an image reference (``host/repo:tag``) to the digest its
registry serves for it now (``host/repo@sha256:...``), with the registry v2 API's manifest
``HEAD`` (``GET`` when the registry sends no ``Docker-Content-Digest``: the digest is the
manifest's sha256), over TLS with an optional CA bundle, anonymously or with the credentials of a
Docker config file (basic, or the bearer token a ``WWW-Authenticate: Bearer`` challenge names).

It also fetches an image digest's cosign signatures (the ``sha256-<hex>.sig`` manifest and its
simple-signing blobs, each checked against its digest) for ``fleetwright.signatures`` to verify.

Owns the reference syntax and those HTTP calls; it decides nothing about when to resolve. A
reference given by digest is returned as it is, without a call. A registry that cannot be reached,
answers 5xx or 429, or refuses the credentials is retryable (``ImageUnresolvedError``); a manifest
the registry says does not exist is permanent (``ImageNotFoundError``). Credentials are sent,
never logged or put in an error.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import urllib3

from fleetwright.errors import PermanentError, RetryableError
from fleetwright.signatures import SignatureLayer, blob_matches, signature_layers, signature_tag

DOCKER_HUB = "registry-1.docker.io"
# What a manifest HEAD accepts: an image index or a single-platform manifest, OCI or Docker.
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
REPOSITORY = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+|/)[a-z0-9]+)*")
POOL_SIZE = 16
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


class ImageUnresolvedError(RetryableError):
    """The registry could not say which digest a tag names now (unreachable, 5xx, throttled,
    credentials refused): nothing may start on that image until it can."""

    reason = "ImageUnresolved"


class ImageNotFoundError(PermanentError):
    """The registry says the reference names no manifest."""

    reason = "ImageNotFound"


class InvalidImageReferenceError(PermanentError):
    reason = "InvalidImageReference"


@dataclass(frozen=True)
class ImageReference:
    """``host/repository`` with a tag, a digest or both (``host/repo:tag@sha256:...``)."""

    host: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def name(self) -> str:
        return f"{self.host}/{self.repository}"

    def pinned(self, digest: str) -> str:
        """The reference a node pulls by digest: ``host/repository@sha256:...``."""
        return f"{self.name}@{digest}"


def parse_reference(reference: str) -> ImageReference:
    """A reference as Docker spells it; without a host it is Docker Hub's (``library/`` for one
    path component). An error names the reference."""
    rest, _, digest = reference.partition("@")
    if digest and not DIGEST.match(digest):
        raise InvalidImageReferenceError(f"{reference}: the digest must be sha256:<64 hex>")
    first, slash, path = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        host = first
    else:
        host, path = DOCKER_HUB, rest if slash else f"library/{rest}"
    repository, _, tag = path.rpartition(":") if ":" in path else (path, "", "")
    if not repository or not REPOSITORY.fullmatch(repository):
        raise InvalidImageReferenceError(f"{reference}: {repository!r} is not a repository name")
    if not digest and not tag:
        tag = "latest"
    return ImageReference(host, repository, tag or None, digest or None)


def is_pinned(reference: str) -> bool:
    return "@" in reference


@dataclass(frozen=True)
class RegistryAccess:
    """How the worker reaches registries (its settings): the CA bundle that verifies them (empty:
    the system's), a Docker config file with credentials per registry host (empty: anonymous), and
    the timeout of one call."""

    ca_file: str = ""
    auth_file: str = ""
    timeout_seconds: float = 10.0


@dataclass
class Registry:
    """Manifest digests from OCI registries, with ``access``'s CA bundle and credentials."""

    access: RegistryAccess = field(default_factory=RegistryAccess)
    _pool: urllib3.PoolManager | None = None

    def resolve(self, reference: str) -> str:
        """``reference`` pinned to the digest its registry serves now; as it is when it carries a
        digest already (no call)."""
        ref = parse_reference(reference)
        if ref.digest is not None:
            return reference
        try:
            return ref.pinned(self._digest(ref))
        except (ImageUnresolvedError, ImageNotFoundError) as error:
            # The same kind of error, naming the reference: the rollout shows it as it is.
            raise type(error)(f"{reference}: {error.message}") from None

    def signatures(self, pinned: str) -> tuple[SignatureLayer, ...]:
        """The cosign signature layers stored for ``pinned`` (``host/repo@sha256:...``): none when
        its ``.sig`` tag does not exist. A blob that is missing or whose bytes do not match its
        digest is left out. Unreachable: ``ImageUnresolvedError`` naming ``pinned``."""
        ref = parse_reference(pinned)
        if ref.digest is None:
            raise InvalidImageReferenceError(f"{pinned}: signatures are looked up by digest")
        try:
            return self._signature_layers(ref, ref.digest)
        except ImageUnresolvedError as error:
            raise ImageUnresolvedError(f"{pinned}: signatures: {error.message}") from None

    def _signature_layers(self, ref: ImageReference, digest: str) -> tuple[SignatureLayer, ...]:
        base = f"https://{ref.host}/v2/{ref.repository}"
        try:
            document = json.loads(self._call("GET", f"{base}/manifests/{signature_tag(digest)}", ref).data)
        except (ImageNotFoundError, ValueError):
            return ()
        layers = []
        for blob_digest, signature in signature_layers(document if isinstance(document, dict) else {}):
            try:
                blob = self._call("GET", f"{base}/blobs/{blob_digest}", ref, redirects=True).data
            except ImageNotFoundError:
                continue
            if blob_matches(blob, blob_digest):
                layers.append(SignatureLayer(blob, signature))
        return tuple(layers)

    def _digest(self, ref: ImageReference) -> str:
        url = f"https://{ref.host}/v2/{ref.repository}/manifests/{ref.tag}"
        response = self._call("HEAD", url, ref)
        digest = response.headers.get("Docker-Content-Digest", "")
        if not DIGEST.match(digest):
            response = self._call("GET", url, ref)
            digest = "sha256:" + hashlib.sha256(response.data).hexdigest()
        return digest

    # ----- HTTP ------------------------------------------------------------------------------
    def _call(
        self, method: str, url: str, ref: ImageReference, *, redirects: bool = False
    ) -> urllib3.BaseHTTPResponse:
        headers = {"Accept": ", ".join(MANIFEST_TYPES)}
        response = self._request(method, url, headers, ref, redirects=redirects)
        if response.status == 401:
            headers["Authorization"] = self._authorization(response.headers.get("WWW-Authenticate", ""), ref)
            response = self._request(method, url, headers, ref, redirects=redirects)
        if response.status == 404:
            raise ImageNotFoundError("the registry has no such manifest")
        if response.status != 200:
            raise ImageUnresolvedError(f"the registry answered HTTP {response.status}")
        return response

    def _request(
        self, method: str, url: str, headers: dict[str, str], ref: ImageReference, *, redirects: bool = False
    ) -> urllib3.BaseHTTPResponse:
        # Blobs may be served from elsewhere (a redirect to storage): urllib3 drops the
        # Authorization header when a redirect leaves the host.
        retries = urllib3.Retry(total=None, connect=0, read=0, status=0, redirect=3) if redirects else False
        try:
            return self._manager().request(
                method, url, headers=headers, timeout=self.access.timeout_seconds, retries=retries
            )
        except urllib3.exceptions.HTTPError as exc:
            raise ImageUnresolvedError(f"{ref.host} unreachable: {type(exc).__name__}") from None

    def _manager(self) -> urllib3.PoolManager:
        if self._pool is None:
            ca = self.access.ca_file
            # One connection per image a generation resolves at once, to the same registry.
            self._pool = urllib3.PoolManager(maxsize=POOL_SIZE, ca_certs=ca or None)
        return self._pool

    def _authorization(self, challenge: str, ref: ImageReference) -> str:
        """The Authorization header answering a 401's challenge: basic with the host's
        credentials, or a bearer token from the realm the challenge names."""
        scheme, _, params = challenge.partition(" ")
        basic = self._basic(ref.host)
        if scheme.lower() == "basic":
            if basic is None:
                raise ImageUnresolvedError(f"{ref.host} asks for credentials and auth_file has none for it")
            return f"Basic {basic}"
        if scheme.lower() != "bearer":
            raise ImageUnresolvedError(f"{ref.host} answered 401 without a Basic or Bearer challenge")
        fields = dict(_CHALLENGE_PARAM.findall(params))
        query = {k: v for k, v in fields.items() if k in ("service", "scope")}
        query.setdefault("scope", f"repository:{ref.repository}:pull")
        headers = {"Authorization": f"Basic {basic}"} if basic else {}
        answer = self._request("GET", f"{fields.get('realm', '')}?{urlencode(query)}", headers, ref)
        if answer.status != 200:
            raise ImageUnresolvedError(f"{ref.host}'s token service answered HTTP {answer.status}")
        token = _token(answer.data)
        if not token:
            raise ImageUnresolvedError(f"{ref.host}'s token service sent no token")
        return f"Bearer {token}"

    def _basic(self, host: str) -> str | None:
        """base64(user:password) for ``host`` from the Docker config file, read at each call so
        a rotated Secret takes effect."""
        if not self.access.auth_file:
            return None
        try:
            auths = json.loads(Path(self.access.auth_file).read_text(encoding="utf-8")).get("auths", {})
        except (OSError, ValueError) as exc:
            raise ImageUnresolvedError(f"cannot read the registry auth_file: {type(exc).__name__}") from None
        entry: dict[str, Any] = auths.get(host) or auths.get(f"https://{host}") or {}
        if entry.get("auth"):
            return str(entry["auth"])
        if entry.get("username"):
            return base64.b64encode(f"{entry['username']}:{entry.get('password', '')}".encode()).decode()
        return None


def _token(body: bytes) -> str:
    try:
        answer = json.loads(body)
    except ValueError:
        return ""
    return str(answer.get("token") or answer.get("access_token") or "") if isinstance(answer, dict) else ""
