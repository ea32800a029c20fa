"""Layered packages: a Dockerfile ``FROM`` another package's image, built and tested with its base's
files, as NodeWright's ``nvidia-tuned`` is on ``tuned`` (package test needs root)."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetwright.binaries import control_plane_binary
from fleetwright.cli import commands
from fleetwright.cli.app import app
from fleetwright.cli.package import lint
from fleetwright.images import catalog, offline
from tests.support.payloads import step, write_package

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
commands.load(["package"])  # as the program does: `fleetwright package` registers its commands


def _executable(payload: Path) -> None:
    for script in (payload / "skyhook_dir").iterdir():
        script.chmod(0o755)


def _base(directory: Path) -> None:
    """tuned-like: apply installs (writes /etc/base.applied), config writes the profile it is given."""
    write_package(
        str(directory / "skyhook-package"),
        {
            "apply": [step("apply.sh")],
            "apply-check": [step("apply_check.sh")],
            "config": [step("config.sh")],
            "config-check": [step("config_check.sh")],
        },
        {
            "apply.sh": "#!/bin/sh\necho base > /etc/base.applied\n",
            "apply_check.sh": "#!/bin/sh\ntest -s /etc/base.applied\n",
            "config.sh": '#!/bin/sh\ncat "$SKYHOOK_DIR/configmaps/profile" > /etc/profile.active\n',
            "config_check.sh": "#!/bin/sh\ntest -s /etc/profile.active\n",
        },
        name="tuned",
        version="1.2.0",
    )
    _executable(directory / "skyhook-package")
    (directory / "Dockerfile").write_text("FROM busybox:1.36\nCOPY skyhook-package /skyhook-package\n")
    (directory / "README.md").write_text("# tuned\n")


def _layered(directory: Path, base_ref: str = "ghcr.io/example/packages/tuned:1.2.0") -> None:
    """gpu-tuned: the base's steps plus a profile of its own as the default configMap."""
    payload = directory / "skyhook-package"
    (payload / "configmaps").mkdir(parents=True)
    (payload / "configmaps" / "profile").write_text("gpu-performance\n")
    base_config = json.loads((directory.parent / "tuned" / "skyhook-package" / "config.json").read_text())
    (payload / "config.json").write_text(json.dumps({**base_config, "package_name": "gpu-tuned"}))
    (directory / "Dockerfile").write_text(
        f"FROM {base_ref}\nCOPY skyhook-package /skyhook-package\nCOPY README.md /skyhook-package/\n"
    )
    (directory / "README.md").write_text("# gpu-tuned\n")


@pytest.fixture
def catalog_dir(tmp_path: Path) -> Path:
    _base(tmp_path / "tuned")
    _layered(tmp_path / "gpu-tuned")
    return tmp_path


def test_the_base_is_the_sibling_directory_and_its_files_lie_under_the_layer(catalog_dir: Path) -> None:
    package = catalog.read(catalog_dir / "gpu-tuned")
    assert (package.name, package.version, package.base) == ("gpu-tuned", "1.2.0", catalog_dir / "tuned")
    assert [p.name for p in catalog.layer_chain(package)] == ["tuned", "gpu-tuned"]
    payload = catalog.assemble(package, catalog_dir / "image")
    assert (payload / "skyhook_dir" / "apply.sh").read_text().startswith("#!/bin/sh")
    assert json.loads((payload / "config.json").read_text())["package_name"] == "gpu-tuned"
    assert (payload / "README.md").read_text() == "# gpu-tuned\n"
    assert lint(str(catalog_dir / "gpu-tuned")).errors == []


def test_package_test_runs_the_base_layers_scripts(catalog_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("package test runs chroots and must run as root")
    args = [
        "package",
        "test",
        str(catalog_dir / "gpu-tuned"),
        "--mode",
        "apply",
        "--mode",
        "config",
        "--keep",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "resource_id=test-0000-1_gpu-tuned_1.2.0" in result.output
    kept = Path(result.output.strip().splitlines()[-1].removeprefix("test root kept at "))
    assert (kept / "etc/base.applied").read_text() == "base\n"
    assert (kept / "etc/profile.active").read_text() == "gpu-performance\n"


def test_a_base_that_is_not_here_fails_naming_the_dockerfile(catalog_dir: Path) -> None:
    _layered(catalog_dir / "other", "ghcr.io/example/packages/tuned:9.9.9")
    with pytest.raises(
        catalog.CatalogError, match=r"other/Dockerfile: FROM ghcr.io/example/packages/tuned:9.9.9"
    ):
        catalog.read(catalog_dir / "other")
    result = CliRunner().invoke(app, ["package", "test", str(catalog_dir / "other"), "--mode", "apply"])
    assert result.exit_code == 1
    assert "no sibling package directory" in result.output
    plain = CliRunner().invoke(
        app, ["package", "test", str(catalog_dir / "tuned"), "--mode", "apply", "--base", str(catalog_dir)]
    )
    assert plain.exit_code == 1
    assert "is not FROM another package" in plain.output


def test_the_image_build_stacks_the_layers_and_package_test_reads_its_archive(
    catalog_dir: Path, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.fail("package test runs chroots and must run as root")
    builder = offline.Builder(REPO, tmp_path / "cache", control_plane_binary, log=lambda line: None)
    layered = builder.package(catalog.read(catalog_dir / "gpu-tuned"))
    with tarfile.open(layered.archive) as archive:
        index = json.loads(archive.extractfile("index.json").read())  # type: ignore[union-attr]
        manifest = json.loads(_blob(archive, index["manifests"][0]["digest"]))
    names = [_names(layer) for layer in catalog.archive_layers(layered.archive)]
    assert len(manifest["layers"]) == len(names) == 3, "busybox, the base's COPYs, its own COPYs"
    assert "bin/busybox" in names[0]
    assert "skyhook-package/skyhook_dir/apply.sh" in names[1]
    assert "skyhook-package/configmaps/profile" in names[2]
    assert "skyhook-package/skyhook_dir/apply.sh" not in names[2]

    # The base as an image archive (what a registry pull or `docker save` gives) instead of a directory.
    base_archive = builder.package(catalog.read(catalog_dir / "tuned")).archive
    (catalog_dir / "tuned" / "Dockerfile").unlink()  # no sibling to fall back to
    args = [
        "package",
        "test",
        str(catalog_dir / "gpu-tuned"),
        "--base",
        str(base_archive),
        "--mode",
        "config",
    ]
    result = CliRunner().invoke(app, [*args, "--keep"])
    assert result.exit_code == 0, result.output
    kept = Path(result.output.strip().splitlines()[-1].removeprefix("test root kept at "))
    assert (kept / "etc/profile.active").read_text() == "gpu-performance\n"


def _blob(archive: tarfile.TarFile, digest: str) -> bytes:
    handle = archive.extractfile("blobs/sha256/" + digest.split(":")[1])
    assert handle is not None
    return handle.read()


def _names(layer: bytes) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        return set(tar.getnames())
