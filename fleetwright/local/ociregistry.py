"""A local OCI registry (Debian's ``docker-registry``, distribution 2.8, installed by
``tools/setup.sh``) on loopback, serving TLS with a certificate of the local CA into a scratch
store: what image pinning resolves against in the integration tier, and where images are pushed
with ``skopeo copy`` (Debian's ``skopeo``) from OCI archives (those the offline image builder
makes, or any other).

Owns its configuration, starting and stopping it, and pushing an archive to it (``publish``: an
image the offline builder made, under this registry's host as the README's install pushes it).
Anonymous: no auth, since only this machine reaches it.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from fleetwright.binaries import SETUP_HINT, MissingBinaryError
from fleetwright.images.offline import Built
from fleetwright.local.launcher import Launcher
from fleetwright.local.loopback import LOOPBACK, free_port
from fleetwright.local.pki import LocalCA
from fleetwright.local.processes import Supervised, run_tool, wait_until

REGISTRY = Path("/usr/bin/docker-registry")
SKOPEO = Path("/usr/bin/skopeo")
START_TIMEOUT = 30.0
PUSH_TIMEOUT = 300.0
# skopeo's signature policy for pushes to this registry only: accept whatever is copied (the
# archive is this machine's own); it never replaces the machine's /etc/containers/policy.json.
ACCEPT_ANYTHING = {"default": [{"type": "insecureAcceptAnything"}]}


def _tool(path: Path, package: str) -> Path:
    if not os.access(path, os.X_OK):
        raise MissingBinaryError(f"{path.name} not found at {path} (Debian {package}): {SETUP_HINT}")
    return path


@dataclass
class LocalRegistry(Launcher):
    """A running (or startable) registry. Use as a context manager. ``ca``: the CA whose
    certificate it serves with (its own in the work directory when None)."""

    workdir: Path | None = None
    ca: LocalCA | None = None
    port: int = field(init=False)
    process: Supervised = field(init=False)

    def __post_init__(self) -> None:
        self.workdir = self._work_directory(self.workdir, "fleetwright-registry-")
        self.ca = self.ca or LocalCA(self.workdir / "pki", common_name="fleetwright-registry-ca")
        self.port = free_port()
        argv = [str(_tool(REGISTRY, "docker-registry")), "serve", str(self.config_path)]
        self.process = Supervised("docker-registry", argv, self.workdir / "registry.log")

    @property
    def host(self) -> str:
        """``127.0.0.1:<port>``: the host part of the references of images pushed here."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def ca_file(self) -> Path:
        """The CA bundle that verifies it (the worker's ``registry_ca_file``)."""
        assert self.ca is not None
        return self.ca.cert_path

    @property
    def config_path(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "config.yml"

    def config(self, cert: Path, key: Path) -> dict[str, object]:
        assert self.workdir is not None
        return {
            "version": 0.1,
            "log": {"level": "warn"},
            "storage": {
                "filesystem": {"rootdirectory": str(self.workdir / "data")},
                "delete": {"enabled": True},
            },
            "http": {"addr": self.host, "tls": {"certificate": str(cert), "key": str(key)}},
        }

    # ----- lifecycle -------------------------------------------------------------------------
    def _start(self) -> None:
        assert self.ca is not None
        pair = self.ca.issue("registry", common_name=LOOPBACK, ip_addresses=(LOOPBACK,), server=True)
        self.config_path.write_text(yaml.safe_dump(self.config(pair.cert, pair.key), sort_keys=False))
        self.process.start()
        wait_until(
            self.ready,
            timeout=START_TIMEOUT,
            what="docker-registry",
            alive=self.process.check_alive,
            interval=0.05,
        )

    def _stop(self) -> None:
        self.process.stop()

    def ready(self) -> bool:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(f"https://{self.host}/v2/", timeout=5, context=context) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    # ----- pushing ---------------------------------------------------------------------------
    def push(self, archive: Path, repository: str, tag: str) -> str:
        """Copy an OCI archive to ``<host>/<repository>:<tag>`` (``skopeo copy``, digests kept);
        the manifest's digest."""
        assert self.workdir is not None
        certs = self.workdir / "skopeo-certs"
        certs.mkdir(exist_ok=True)
        (certs / "ca.crt").write_bytes(self.ca_file.read_bytes())
        policy = self.workdir / "skopeo-policy.json"
        policy.write_text(json.dumps(ACCEPT_ANYTHING))
        digest_file = self.workdir / "pushed.digest"
        argv = [
            str(_tool(SKOPEO, "skopeo")),
            f"--policy={policy}",
            "copy",
            "--preserve-digests",
            f"--dest-cert-dir={certs}",
            f"--digestfile={digest_file}",
            f"oci-archive:{archive}",
            f"docker://{self.host}/{repository}:{tag}",
        ]
        run_tool(argv, what=f"skopeo copy {archive.name} to {repository}:{tag}", timeout=PUSH_TIMEOUT)
        return digest_file.read_text().strip()

    def publish(self, image: Built) -> Built:
        """``image`` pushed here as the README's install pushes it (its repository's registry host
        replaced by this one's, ``ghcr.io/fleetwright/agent:T`` to ``<host>/fleetwright/agent:T``),
        under the digest it was built with."""
        path = image.repository.split("/", 1)[1]
        digest = self.push(image.archive, path, image.tag)
        if digest != image.digest:
            raise RuntimeError(f"{image.ref} was pushed as {digest}, not its built digest {image.digest}")
        return replace(image, ref=f"{self.host}/{path}:{image.tag}")
