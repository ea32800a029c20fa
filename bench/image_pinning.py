"""What image pinning costs: the local OCI registry's start (Debian's ``docker-registry`` on loopback
with TLS, ``fleetwright.local.ociregistry``: until ``/v2/`` answers), and the resolve-images
activity's body for one generation of ``--packages`` package images plus the agent image (one
manifest HEAD each, concurrently, over TLS), p50 / p99 over ``--rounds`` generations; then the same
with a policy's ``imageSignatures`` (each package image signed by the real cosign, one key of two in
the keys Secret: the ``.sig`` manifest and blob fetched and verified per image). That activity is
what a generation's start waits for (plus one activity round-trip on Temporal).

    .venv/bin/python bench/image_pinning.py --starts 5 --packages 10 --rounds 200
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from temporalio.testing import ActivityEnvironment

from fleetwright.activities.images import ImageResolver
from fleetwright.activities.payloads import ResolveImagesRequest, SignatureCheck
from fleetwright.local.ociregistry import LocalRegistry
from fleetwright.registry import Registry, RegistryAccess

if not __package__:  # run as a file (python bench/image_pinning.py): the repository root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import loadavg, percentile
from tests.support.cosign import Cosign
from tests.support.ociimages import write_archive


def one_start() -> float:
    with LocalRegistry() as registry:
        return registry.startup_seconds


def resolutions(registry: LocalRegistry, packages: int, rounds: int) -> tuple[list[float], list[float]]:
    """Seconds of the resolve-images activity per generation of ``packages`` images and the agent:
    pinning only, then pinning and checking each package image's signature."""
    scratch = Path(tempfile.mkdtemp(prefix="fleetwright-bench-images-"))
    cosign = Cosign(registry, scratch)
    signer, other = cosign.key_pair("signer"), cosign.key_pair("other")
    references = []
    for index in range(packages + 1):
        archive = write_archive(scratch / f"{index}.tar", {"content": str(index).encode()})
        digest = registry.push(archive, f"bench/pkg{index}", "1.0.0")
        references.append(f"{registry.host}/bench/pkg{index}:1.0.0")
        if index < packages:  # the last one stands for the agent image, which is not checked
            cosign.sign(signer, f"{registry.host}/bench/pkg{index}@{digest}")
    secret = {f"{k.name}.pub": (k / "cosign.pub").read_text() for k in (other, signer)}
    resolver = ImageResolver(
        Registry(RegistryAccess(ca_file=str(registry.ca_file))), lambda _ns, _name: secret
    )
    plain = ResolveImagesRequest(profile="bench", references=tuple(references))
    check = SignatureCheck(
        mode="enforce", namespace="bench", secret="keys", references=tuple(references[:-1])
    )
    signed = plain.model_copy(update={"signatures": check})
    return _timed(resolver, plain, rounds), _timed(resolver, signed, rounds)


def _timed(resolver: ImageResolver, request: ResolveImagesRequest, rounds: int) -> list[float]:
    seconds = []
    for _ in range(rounds):
        started = time.monotonic()
        asyncio.run(ActivityEnvironment().run(resolver.resolve_images, request))
        seconds.append(time.monotonic() - started)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--packages", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    starts = [one_start() for _ in range(args.starts)]
    with LocalRegistry() as registry:
        seconds, signed = resolutions(registry, args.packages, args.rounds)
    print(f"docker-registry (Debian, distribution 2.8) on loopback with TLS; load {loadavg()}")
    print(f"  start until /v2/ answers, median of {args.starts}: {statistics.median(starts) * 1000:.0f} ms")
    print(
        f"  resolve {args.packages} packages + the agent, {args.rounds} generations: "
        f"p50 {percentile(seconds, 50) * 1000:.1f} ms, p99 {percentile(seconds, 99) * 1000:.1f} ms"
    )
    print(
        f"  resolve and verify the {args.packages} packages' cosign signatures (+ the agent), "
        f"{args.rounds} generations: "
        f"p50 {percentile(signed, 50) * 1000:.1f} ms, p99 {percentile(signed, 99) * 1000:.1f} ms"
    )
    print(
        f"reproduce: .venv/bin/python bench/image_pinning.py --starts {args.starts} "
        f"--packages {args.packages} --rounds {args.rounds}"
    )


if __name__ == "__main__":
    main()
