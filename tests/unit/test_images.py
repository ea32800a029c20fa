"""The image definitions: the generated Dockerfiles match the spec, catalog packages are read from
their own Dockerfiles, and the offline builder's layers and archives are what the spec says."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest

from fleetwright.binaries import control_plane_binary
from fleetwright.images import catalog, dockerfile, offline, spec

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def test_generated_dockerfiles_do_not_drift() -> None:
    stale = dockerfile.write(REPO, catalog.packages(REPO), check=True)
    assert stale == [], "run python -m fleetwright.images dockerfiles"


def test_a_stale_dockerfile_is_reported_and_rewritten(tmp_path: Path) -> None:
    for image in spec.PRODUCT_IMAGES:
        (tmp_path / image.dockerfile).parent.mkdir(parents=True, exist_ok=True)
    packages = catalog.packages(REPO)
    assert len(dockerfile.write(tmp_path, packages, check=True)) == len(spec.PRODUCT_IMAGES) + 1
    assert not (tmp_path / "docker-bake.hcl").exists()
    dockerfile.write(tmp_path, packages, check=False)
    assert dockerfile.write(tmp_path, packages, check=True) == []


def test_product_images_run_as_the_spec_says() -> None:
    worker = dockerfile.render(spec.FLEETWRIGHT)
    # The chart's restricted security context runs it as 65532: the image must not need root.
    assert "USER 65532:65532" in worker
    # Build tools stay in the build stage: the final stage starts FROM the slim base again.
    final = worker.split("\n\nFROM ")[1]
    assert "pip" not in final
    assert final.startswith(spec.DEBIAN_IMAGE)
    assert 'ENTRYPOINT ["fleetwright"]' in worker
    agent = dockerfile.render(spec.AGENT)
    assert "USER 0:0" in agent
    assert 'ENTRYPOINT ["python3", "-m", "fleetwright.agent"]' in agent
    for image in spec.PRODUCT_IMAGES:
        assert image.labels["org.opencontainers.image.version"] == spec.VERSION
        assert "@sha256" not in dockerfile.render(image), "no base digest that could not be verified"


def test_catalog_packages_are_read_from_their_dockerfiles() -> None:
    packages = {p.name: p for p in catalog.packages(REPO)}
    shellscript = packages["shellscript"]
    assert shellscript.ref == "ghcr.io/fleetwright/packages/shellscript:1.0.0"
    assert shellscript.copies == (
        catalog.Copy(("skyhook-package",), "/skyhook-package"),
        catalog.Copy(("README.md", "Dockerfile"), "/skyhook-package/"),
    )


def test_a_package_dockerfile_with_more_than_copy_is_refused(tmp_path: Path) -> None:
    package = tmp_path / "odd"
    (package / "skyhook-package").mkdir(parents=True)
    (package / "skyhook-package" / "config.json").write_text(
        '{"package_name": "odd", "package_version": "1.0.0"}'
    )
    (package / "Dockerfile").write_text(
        "FROM busybox:1.36\nRUN rm -rf /\nCOPY skyhook-package /skyhook-package\n"
    )
    with pytest.raises(catalog.CatalogError, match=r"odd/Dockerfile: only plain COPY lines may follow FROM"):
        catalog.read(package)


def test_layers_are_reproducible_and_owned_by_root(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    (stage / "opt" / "x").mkdir(parents=True)
    (stage / "opt" / "x" / "run").write_text("#!/bin/sh\n")
    (stage / "opt" / "x" / "run").chmod(0o755)
    (stage / "opt" / "x" / "link").symlink_to("run")
    first = offline.layer_tar(stage, tmp_path / "a.tar").read_bytes()
    (stage / "opt" / "x" / "run").touch()
    assert offline.layer_tar(stage, tmp_path / "b.tar").read_bytes() == first
    with tarfile.open(tmp_path / "a.tar") as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert sorted(members) == ["opt", "opt/x", "opt/x/link", "opt/x/run"]
    assert all(m.uid == 0 and m.gid == 0 and m.mtime == offline.EPOCH for m in members.values())
    assert members["opt/x/run"].mode == 0o755
    assert members["opt/x/link"].linkname == "run"


def test_a_package_image_is_busybox_plus_its_copies(tmp_path: Path) -> None:
    lines: list[str] = []
    builder = offline.Builder(REPO, tmp_path, control_plane_binary, log=lines.append)
    built = builder.package(catalog.read(REPO / "packages" / "shellscript"))
    assert built.ref == "ghcr.io/fleetwright/packages/shellscript:1.0.0"
    again = builder.package(catalog.read(REPO / "packages" / "shellscript"))
    assert again == built, "a second build is the cached one"
    assert sum("building" in line for line in lines) == 1
    with tarfile.open(built.archive) as archive:
        index = json.loads(archive.extractfile("index.json").read())  # type: ignore[union-attr]
        manifest = json.loads(_blob(archive, index["manifests"][0]["digest"]))
        config = json.loads(_blob(archive, manifest["config"]["digest"]))
        files = [_names(archive, layer["digest"]) for layer in manifest["layers"]]
    assert index["manifests"][0]["digest"] == built.digest
    assert index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == "1.0.0"
    assert config["config"]["Cmd"] == ["sh"]
    assert {"bin/busybox", "bin/sh", "bin/cp", "bin/mkdir"} <= files[0]
    assert {
        "skyhook-package/config.json",
        "skyhook-package/skyhook_dir/run.sh",
        "skyhook-package/Dockerfile",
    } <= files[1]


def _blob(archive: tarfile.TarFile, digest: str) -> bytes:
    handle = archive.extractfile("blobs/sha256/" + digest.split(":")[1])
    assert handle is not None
    return handle.read()


def _names(archive: tarfile.TarFile, digest: str) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(_blob(archive, digest)))) as layer:
        return set(layer.getnames())
