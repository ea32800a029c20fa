"""fleetwright's one small certificate authority: a CA, serving certificates for DNS names and IP
addresses, and client certificates, as PEM bytes (``caBundle`` is the CA PEM, base64).

Used by the admission webhook (tests on loopback, the Helm chart's certificate bootstrap) and by
the local control plane's PKI (``local.pki``). Pure apart from
``write_bundle``; the caller passes ``now`` so certificates are reproducible in time. Must not talk
to the Kubernetes API (storing the bundle in a Secret is the adapter's job).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Clock skew between the generating machine and the apiserver must not make a fresh cert invalid.
_BACKDATE = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, PEM-encoded."""

    cert_pem: bytes
    key_pem: bytes


@dataclass(frozen=True)
class TlsBundle:
    """Everything a webhook deployment needs: the CA (for ``caBundle``) and the serving pair."""

    ca: KeyPair
    serving: KeyPair

    @property
    def ca_bundle(self) -> str:
        """The CA certificate, base64-encoded, as ``clientConfig.caBundle`` expects."""
        return base64.b64encode(self.ca.cert_pem).decode()


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "fleetwright"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def make_ca(*, now: dt.datetime, common_name: str = "fleetwright-webhook-ca", days: int = 3650) -> KeyPair:
    """A self-signed CA allowed to sign leaf certificates only (path length 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _subject_alt_names(dns_names: Sequence[str], ip_addresses: Sequence[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    entries += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    if not entries:
        raise ValueError("a serving certificate needs at least one DNS name or IP address")
    return x509.SubjectAlternativeName(entries)


def make_serving_cert(
    ca: KeyPair,
    *,
    now: dt.datetime,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    days: int = 365,
) -> KeyPair:
    """A TLS server certificate signed by ``ca`` for the given names (the apiserver checks SANs only)."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key must be an EC key made by make_ca")
    key = ec.generate_private_key(ec.SECP256R1())
    common_name = dns_names[0] if dns_names else ip_addresses[0] if ip_addresses else "fleetwright-webhook"
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(_subject_alt_names(dns_names, ip_addresses), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def make_client_cert(
    ca: KeyPair, *, now: dt.datetime, common_name: str, groups: Sequence[str] = (), days: int = 30
) -> KeyPair:
    """A TLS client certificate: Kubernetes reads the user from CN and the groups from O."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key must be an EC key made by make_ca")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the apiserver may use for an in-cluster webhook Service."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def generate_webhook_tls(
    *,
    now: dt.datetime,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    days: int = 365,
    ca_days: int = 3650,
) -> TlsBundle:
    """A fresh CA and a serving certificate for the webhook."""
    ca = make_ca(now=now, days=ca_days)
    return TlsBundle(
        ca, make_serving_cert(ca, now=now, dns_names=dns_names, ip_addresses=ip_addresses, days=days)
    )


def expires_within(cert_pem: bytes, *, now: dt.datetime, margin: dt.timedelta) -> bool:
    """True when the certificate is expired or expires within ``margin`` (time to rotate)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    return cert.not_valid_after_utc - margin <= now


def write_bundle(bundle: TlsBundle, directory: Path) -> dict[str, Path]:
    """Write ``ca.crt``, ``tls.crt`` and ``tls.key`` (0600) into ``directory``; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {
        "ca.crt": directory / "ca.crt",
        "tls.crt": directory / "tls.crt",
        "tls.key": directory / "tls.key",
    }
    paths["ca.crt"].write_bytes(bundle.ca.cert_pem)
    paths["tls.crt"].write_bytes(bundle.serving.cert_pem)
    paths["tls.key"].touch(mode=0o600)
    paths["tls.key"].write_bytes(bundle.serving.key_pem)
    return paths
