"""Local PKI for the test control plane: the CA, the apiserver's serving certificate, client
certificates (admin, controller-manager, kwok) and the service-account signing key, written as PEM
files into a directory the launcher owns. Certificates come from ``fleetwright.certs``; nothing
here is meant for production.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from fleetwright import certs

_VALIDITY_DAYS = 30


@dataclass(frozen=True)
class CertPair:
    cert: Path
    key: Path


def _write(directory: Path, name: str, pair: certs.KeyPair) -> CertPair:
    files = CertPair(directory / f"{name}.crt", directory / f"{name}.key")
    files.cert.write_bytes(pair.cert_pem)
    files.key.write_bytes(pair.key_pem)
    files.key.chmod(0o600)
    return files


class LocalCA:
    """A throwaway certificate authority that signs serving and client certificates."""

    def __init__(self, directory: Path, common_name: str = "fleetwright-local-ca") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._now = dt.datetime.now(dt.UTC)  # the launcher's own clock: certificates start now
        self._ca = certs.make_ca(now=self._now, common_name=common_name, days=_VALIDITY_DAYS)
        self.cert_path = _write(directory, "ca", self._ca).cert

    @property
    def pem(self) -> bytes:
        return self._ca.cert_pem

    def issue(
        self,
        name: str,
        *,
        common_name: str,
        organization: str | None = None,
        dns_names: tuple[str, ...] = (),
        ip_addresses: tuple[str, ...] = (),
        server: bool = False,
    ) -> CertPair:
        """Issue a leaf certificate; ``server`` selects serving usage, otherwise client auth with
        ``organization`` as the Kubernetes group."""
        if server:
            pair = certs.make_serving_cert(
                self._ca, now=self._now, dns_names=dns_names, ip_addresses=ip_addresses, days=_VALIDITY_DAYS
            )
        else:
            groups = (organization,) if organization else ()
            pair = certs.make_client_cert(
                self._ca, now=self._now, common_name=common_name, groups=groups, days=_VALIDITY_DAYS
            )
        return _write(self.directory, name, pair)


def write_service_account_keys(directory: Path) -> CertPair:
    """The RSA key pair kube-apiserver signs service-account tokens with (``cert`` is the public key)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pair = CertPair(directory / "sa.pub", directory / "sa.key")
    pair.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    pair.key.chmod(0o600)
    pair.cert.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pair
