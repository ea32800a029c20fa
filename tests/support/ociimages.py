"""Tiny OCI image archives (an OCI image layout in a tar, what ``skopeo copy oci-archive:`` reads)
for tests that push to the local registry: one layer holding the given files, so two archives
with different content have different digests. Nothing here runs; kwok nodes pull nothing."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

LAYER = "application/vnd.oci.image.layer.v1.tar"
CONFIG = "application/vnd.oci.image.config.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def _tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, content in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def _descriptor(media_type: str, blob: bytes) -> dict[str, Any]:
    return {
        "mediaType": media_type,
        "digest": "sha256:" + hashlib.sha256(blob).hexdigest(),
        "size": len(blob),
    }


def write_archive(path: Path, files: dict[str, bytes]) -> Path:
    """An OCI archive at ``path`` of one linux/amd64 image whose one layer holds ``files``."""
    layer = _tar(files)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": _descriptor(CONFIG, config),
            "layers": [_descriptor(LAYER, layer)],
        }
    ).encode()
    index = {"schemaVersion": 2, "manifests": [_descriptor(MANIFEST, manifest)]}
    blobs = {f"blobs/sha256/{hashlib.sha256(blob).hexdigest()}": blob for blob in (layer, config, manifest)}
    layout = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(index).encode(),
        **blobs,
    }
    path.write_bytes(_tar(layout))
    return path


def manifest_digest(path: Path) -> str:
    """The digest of the one image's manifest in an archive ``write_archive`` wrote."""
    with tarfile.open(path) as tar:
        member = tar.extractfile("index.json")
        assert member is not None
        return str(json.loads(member.read())["manifests"][0]["digest"])
