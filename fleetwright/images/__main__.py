"""``python -m fleetwright.images``: build the images offline, or regenerate the Dockerfiles.

``build [--packages shellscript,tuning]`` builds (or finds cached) the OCI archives;
``dockerfiles [--check]`` regenerates worker/Dockerfile, agent/Dockerfile and docker-bake.hcl.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fleetwright.binaries import cache_dir, control_plane_binary
from fleetwright.images import catalog, dockerfile, offline


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fleetwright.images")
    parser.add_argument("--repo", type=Path, help="the repository checkout (default: this one)")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build (or find cached) every image as an OCI archive")
    build.add_argument("--packages", help="comma-separated catalog packages (default: all)")
    build.add_argument("--json", action="store_true", help="print the archives as JSON")
    docker = commands.add_parser("dockerfiles", help="regenerate the Dockerfiles and docker-bake.hcl")
    docker.add_argument("--check", action="store_true", help="write nothing; fail if any is stale")
    args = parser.parse_args(argv)
    args.repo = args.repo or offline.repository()
    if args.command == "dockerfiles":
        stale = dockerfile.write(args.repo, catalog.packages(args.repo), check=args.check)
        for path in stale:
            print(f"{'stale' if args.check else 'wrote'}: {path}")
        return 1 if args.check and stale else 0
    packages = args.packages.split(",") if args.packages else None
    log = (lambda line: print(line, file=sys.stderr)) if args.json else print
    try:
        built = offline.Builder(args.repo, cache_dir(), control_plane_binary, log=log).all(packages)
    except offline.ImageBuildError as error:
        print(f"image build failed: {error}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([{**b.__dict__, "archive": str(b.archive)} for b in built], indent=1))
    else:
        for b in built:
            print(f"{b.ref}  {b.digest}  {b.archive}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
