"""The real cosign (built by ``tools/build-cosign.sh``) against the local OCI registry: key pairs
as ``cosign generate-key-pair`` writes them, images signed with ``cosign sign --key`` (no
transparency log), a ``.sig`` manifest copied onto another digest's tag (a signature replayed on
another image), and the keys Secret a policy's ``imageSignatures`` names."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import urllib3

from fleetwright.binaries import control_plane_binary
from fleetwright.local.ociregistry import LocalRegistry
from fleetwright.signatures import signature_tag
from tests.support.providers import ClusterUnderTest

PASSWORD = "fleetwright-test"
SIGNATURE_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


@dataclass
class Cosign:
    registry: LocalRegistry
    home: Path

    def _run(self, *args: str, cwd: Path) -> None:
        # SSL_CERT_FILE: cosign (Go) trusts the registry's local CA instead of the system's roots.
        env = {**os.environ, "COSIGN_PASSWORD": PASSWORD, "SSL_CERT_FILE": str(self.registry.ca_file)}
        env["HOME"] = str(self.home)  # cosign's caches stay in the test's directory
        done = subprocess.run(
            [str(control_plane_binary("cosign")), *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"cosign {args[0]} failed ({done.returncode}): {done.stderr}"

    def key_pair(self, name: str) -> Path:
        """A directory holding ``cosign.key`` and ``cosign.pub``."""
        folder = self.home / name
        folder.mkdir(parents=True)
        self._run("generate-key-pair", cwd=folder)
        return folder

    def sign(self, keys: Path, pinned: str) -> None:
        """Sign ``host/repo@sha256:...`` with ``keys``' private key, pushed beside the image."""
        self._run("sign", "--key", str(keys / "cosign.key"), "--tlog-upload=false", "--yes", pinned, cwd=keys)

    def copy_signature(self, repository: str, signed: str, onto: str) -> None:
        """Put the ``.sig`` manifest of digest ``signed`` under ``onto``'s signature tag (same
        repository, so its blobs are there): a valid signature replayed on another image."""
        http = urllib3.PoolManager(ca_certs=str(self.registry.ca_file))
        base = f"https://{self.registry.host}/v2/{repository}/manifests"
        got = http.request("GET", f"{base}/{signature_tag(signed)}", headers={"Accept": SIGNATURE_MANIFEST})
        assert got.status == 200, got.status
        put = http.request(
            "PUT",
            f"{base}/{signature_tag(onto)}",
            body=got.data,
            headers={"Content-Type": SIGNATURE_MANIFEST},
        )
        assert put.status == 201, (put.status, put.data)


def keys_secret(cluster: ClusterUnderTest, namespace: str, name: str, *pairs: Path) -> None:
    """Secret ``namespace/name`` with each pair's public key as ``<pair folder>.pub``."""
    data = {f"{pair.name}.pub": (pair / "cosign.pub").read_text() for pair in pairs}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps({**secret, "stringData": data}))
