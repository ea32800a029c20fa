"""The OCI registry adapter (``fleetwright.registry``) and the resolve-images activity against a tiny
in-process HTTPS registry on loopback: the manifest HEAD and its Accept header, the GET fallback
that hashes the manifest, bearer-token and basic auth from a Docker config file, references by
digest left alone, and the taxonomy of its failures."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fleetwright.activities.images import ImageResolver
from fleetwright.activities.payloads import ResolveImagesRequest
from fleetwright.cli.plan import resolve_images
from fleetwright.errors import PermanentError, RetryableError
from fleetwright.local import examples
from fleetwright.local.loopback import LOOPBACK
from fleetwright.local.pki import LocalCA
from fleetwright.registry import (
    MANIFEST_TYPES,
    ImageNotFoundError,
    ImageUnresolvedError,
    InvalidImageReferenceError,
    Registry,
    RegistryAccess,
    parse_reference,
)

pytestmark = pytest.mark.unit

MANIFEST = b'{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json"}'
SERVED = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
PINNED = "sha256:" + "c" * 64


@dataclass
class Behaviour:
    """What the fake registry does: send the digest header, ask for which auth, answer what."""

    digest_header: bool = True
    auth: str = ""  # "", "basic" or "bearer"
    status: int = 200
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)


def _handler(behaviour: Behaviour, port: list[int]) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def _answer(self, head: bool) -> None:
            behaviour.requests.append((self.command, self.path, dict(self.headers)))
            if self.path.startswith("/token"):
                self._send(200, json.dumps({"token": "t0ken"}).encode(), head)
                return
            wanted = {"basic": f"Basic {base64.b64encode(b'bot:s3cret').decode()}", "bearer": "Bearer t0ken"}
            if behaviour.auth and self.headers.get("Authorization") != wanted[behaviour.auth]:
                realm = f'Bearer realm="https://{LOOPBACK}:{port[0]}/token",service="test"'
                challenge = realm if behaviour.auth == "bearer" else 'Basic realm="test"'
                self._send(401, b"", head, {"WWW-Authenticate": challenge})
                return
            extra = {"Docker-Content-Digest": SERVED} if behaviour.digest_header else {}
            self._send(behaviour.status, MANIFEST, head, extra)

        def _send(self, status: int, body: bytes, head: bool, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def do_HEAD(self) -> None:
            self._answer(head=True)

        def do_GET(self) -> None:
            self._answer(head=False)

    return Handler


@dataclass
class FakeRegistry:
    host: str
    ca_file: Path
    behaviour: Behaviour


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[FakeRegistry]:
    ca = LocalCA(tmp_path / "pki")
    pair = ca.issue("registry", common_name=LOOPBACK, ip_addresses=(LOOPBACK,), server=True)
    behaviour = Behaviour()
    port: list[int] = []
    server = http.server.ThreadingHTTPServer((LOOPBACK, 0), _handler(behaviour, port))
    port.append(server.server_address[1])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pair.cert, pair.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield FakeRegistry(f"{LOOPBACK}:{port[0]}", ca.cert_path, behaviour)
    server.shutdown()
    server.server_close()


def _client(registry: FakeRegistry, auth_file: Path | None = None) -> Registry:
    access = RegistryAccess(ca_file=str(registry.ca_file), auth_file=str(auth_file or ""), timeout_seconds=5)
    return Registry(access)


def _auth_file(tmp_path: Path, host: str) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"auths": {host: {"auth": base64.b64encode(b"bot:s3cret").decode()}}}))
    return path


@pytest.mark.parametrize(
    ("reference", "host", "repository", "tag", "digest"),
    [
        ("ubuntu", "registry-1.docker.io", "library/ubuntu", "latest", None),
        ("org/pkg:1.0", "registry-1.docker.io", "org/pkg", "1.0", None),
        ("127.0.0.1:5000/pkg/tuning:1.0", "127.0.0.1:5000", "pkg/tuning", "1.0", None),
        ("localhost/a/b", "localhost", "a/b", "latest", None),
        (f"ghcr.io/x/y@{PINNED}", "ghcr.io", "x/y", None, PINNED),
        (f"ghcr.io/x/y:1.0@{PINNED}", "ghcr.io", "x/y", "1.0", PINNED),
    ],
)
def test_references_parse_as_docker_spells_them(
    reference: str, host: str, repository: str, tag: str | None, digest: str | None
) -> None:
    ref = parse_reference(reference)
    assert (ref.host, ref.repository, ref.tag, ref.digest) == (host, repository, tag, digest)


@pytest.mark.parametrize("reference", ["ghcr.io/x/y@sha256:short", "ghcr.io/X/Y:1", "ghcr.io/:1"])
def test_a_malformed_reference_is_refused_naming_it(reference: str) -> None:
    with pytest.raises(InvalidImageReferenceError, match=r"^ghcr\.io/"):
        parse_reference(reference)


def test_a_tag_resolves_to_the_digest_the_registry_sends(registry: FakeRegistry) -> None:
    pinned = _client(registry).resolve(f"{registry.host}/pkg/tuning:1.0")
    assert pinned == f"{registry.host}/pkg/tuning@{SERVED}"
    ((method, path, headers),) = registry.behaviour.requests
    assert (method, path) == ("HEAD", "/v2/pkg/tuning/manifests/1.0")
    assert set(headers["Accept"].split(", ")) == set(MANIFEST_TYPES)


def test_without_a_digest_header_the_manifest_is_hashed(registry: FakeRegistry) -> None:
    registry.behaviour.digest_header = False
    assert _client(registry).resolve(f"{registry.host}/pkg/tuning:1.0").endswith(f"@{SERVED}")
    assert [m for m, _, _ in registry.behaviour.requests] == ["HEAD", "GET"]


def test_a_reference_by_digest_is_used_as_it_is_without_a_call(registry: FakeRegistry) -> None:
    reference = f"{registry.host}/pkg/tuning@{PINNED}"
    assert _client(registry).resolve(reference) == reference
    assert registry.behaviour.requests == []


def test_a_bearer_challenge_gets_a_token_with_the_hosts_credentials(
    registry: FakeRegistry, tmp_path: Path
) -> None:
    registry.behaviour.auth = "bearer"
    client = _client(registry, _auth_file(tmp_path, registry.host))
    assert client.resolve(f"{registry.host}/pkg/tuning:1.0").endswith(f"@{SERVED}")
    token_calls = [(p, h) for _, p, h in registry.behaviour.requests if p.startswith("/token")]
    ((path, headers),) = token_calls
    assert "scope=repository%3Apkg%2Ftuning%3Apull" in path
    assert headers["Authorization"] == f"Basic {base64.b64encode(b'bot:s3cret').decode()}"


def test_a_basic_challenge_is_answered_from_the_docker_config(registry: FakeRegistry, tmp_path: Path) -> None:
    registry.behaviour.auth = "basic"
    client = _client(registry, _auth_file(tmp_path, registry.host))
    assert client.resolve(f"{registry.host}/pkg/tuning:1.0").endswith(f"@{SERVED}")


def test_credentials_the_registry_asks_for_and_nobody_gave_wait(registry: FakeRegistry) -> None:
    registry.behaviour.auth = "basic"
    with pytest.raises(ImageUnresolvedError, match="auth_file has none"):
        _client(registry).resolve(f"{registry.host}/pkg/tuning:1.0")


def test_a_missing_manifest_is_permanent_and_a_failing_registry_retryable(registry: FakeRegistry) -> None:
    registry.behaviour.status = 404
    with pytest.raises(ImageNotFoundError) as missing:
        _client(registry).resolve(f"{registry.host}/pkg/tuning:9.9")
    assert isinstance(missing.value, PermanentError)
    registry.behaviour.status = 503
    with pytest.raises(ImageUnresolvedError, match="HTTP 503") as failing:
        _client(registry).resolve(f"{registry.host}/pkg/tuning:1.0")
    assert isinstance(failing.value, RetryableError)


def test_an_unreachable_registry_is_retryable() -> None:
    client = Registry(RegistryAccess(timeout_seconds=2))
    with pytest.raises(ImageUnresolvedError, match="unreachable"):
        client.resolve(f"{LOOPBACK}:1/pkg/tuning:1.0")


async def test_the_activity_pins_each_reference_and_names_the_one_it_cannot(registry: FakeRegistry) -> None:
    resolver = ImageResolver(_client(registry))
    ok = f"{registry.host}/pkg/tuning:1.0"
    given = f"{registry.host}/agent@{PINNED}"
    answer = await ActivityEnvironment().run(
        resolver.resolve_images, ResolveImagesRequest(profile="p", references=(ok, given))
    )
    assert answer.pinned == {ok: f"{registry.host}/pkg/tuning@{SERVED}", given: given}
    registry.behaviour.status = 404
    request = ResolveImagesRequest(profile="p", references=(ok,))
    with pytest.raises(ApplicationError) as refused:
        await ActivityEnvironment().run(resolver.resolve_images, request)
    assert refused.value.message == f"{ok}: the registry has no such manifest"
    assert refused.value.type == "ImageNotFound"
    assert refused.value.non_retryable


def test_plan_resolves_each_package_image_or_says_why_it_cannot(registry: FakeRegistry) -> None:
    reachable = {"name": "tuning", "version": "1.0.0", "image": f"{registry.host}/pkg/tuning"}
    gone = {"name": "other", "version": "2.0.0", "image": f"{LOOPBACK}:1/pkg/other"}
    profile = examples.profile("p")
    spec = profile.spec.model_validate(
        {**profile.spec.model_dump(by_alias=True), "packages": [reachable, gone]}
    )
    images = resolve_images(profile.model_copy(update={"spec": spec}), registry.ca_file)
    assert images == {
        f"{registry.host}/pkg/tuning:1.0.0": f"{registry.host}/pkg/tuning@{SERVED}",
        f"{LOOPBACK}:1/pkg/other:2.0.0": f"unresolved: ImageUnresolved: {LOOPBACK}:1/pkg/other:2.0.0: "
        f"{LOOPBACK}:1 unreachable: NewConnectionError",
    }


def test_signatures_of_a_digest_without_a_sig_tag_are_none(registry: FakeRegistry) -> None:
    pinned = f"{registry.host}/pkg/tuning@{PINNED}"
    assert _client(registry).signatures(pinned) == ()  # a manifest without signature layers
    assert registry.behaviour.requests[-1][1] == f"/v2/pkg/tuning/manifests/sha256-{'c' * 64}.sig"
    registry.behaviour.status = 404
    assert _client(registry).signatures(pinned) == ()


def test_signatures_from_an_unreachable_registry_are_retryable_naming_the_image() -> None:
    pinned = f"{LOOPBACK}:1/pkg/tuning@{PINNED}"
    with pytest.raises(ImageUnresolvedError, match=f"^{pinned}: signatures: {LOOPBACK}:1 unreachable"):
        Registry(RegistryAccess(timeout_seconds=2)).signatures(pinned)
    with pytest.raises(InvalidImageReferenceError, match="looked up by digest"):
        Registry().signatures(f"{LOOPBACK}:1/pkg/tuning:1.0")
