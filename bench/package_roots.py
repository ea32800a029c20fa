"""What a real distribution root costs and what it changes: the ``debian-real`` root's build time
cold (an empty cache) and warm (cached), its size, the time to unpack one test root from it, and
the catalog's lifecycles (``tests/support/lifecycle.py``: install, config change, upgrade,
uninstall, each with its checks) on every ``--os`` root, as a table of the phases that pass.

The cold build downloads every package from the Debian archive, so it moves with the network as
much as with the machine; the lifecycles on ``debian-real`` download what each package installs.
Run as root from the repository root:

    .venv/bin/python bench/package_roots.py                  # cold build in a scratch cache, then all
    .venv/bin/python bench/package_roots.py --warm-only      # the cache's root; no cold build
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleetwright.binaries import cache_dir
from fleetwright.images import roots
from fleetwright.packagetest import hostroot
from fleetwright.packagetest.flavours import FLAVOURS
from tests.support.lifecycle import LIFECYCLES, NOT_HERE, PhaseResult, run

ROOT = "debian-real"


def timed_build(cache: Path) -> tuple[float, Path]:
    started = time.monotonic()
    tar = roots.build(cache, ROOT, log=lambda line: print(f"  {line}", file=sys.stderr))
    return time.monotonic() - started, tar


def new_root(work: str, flavour: str, tar: Path) -> hostroot.HostRoot:
    path = os.path.join(work, flavour)
    if FLAVOURS[flavour].real:
        return hostroot.unpack(path, str(tar), flavour=flavour)
    return hostroot.build(path, flavour=flavour)


def cell(results: list[PhaseResult]) -> str:
    parts = []
    for result in results:
        if not result.ran:
            parts.append(f"{result.phase} not run")
        elif result.ok:
            parts.append(f"{result.phase} ✓")
        else:
            parts.append(f"{result.phase} ✗ ({result.failed_at})")
    return ", ".join(parts)


def modes(results: list[PhaseResult]) -> str:
    """The distinct agent modes that passed over the whole lifecycle."""
    seen = dict.fromkeys(m for r in results for m in r.passed if not m.startswith("interrupt ("))
    return " ".join(seen)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warm-only", action="store_true", help="skip the cold build")
    parser.add_argument("--packages", help="comma-separated catalog packages (default: all)")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    if not args.warm_only:
        with tempfile.TemporaryDirectory(prefix="cold-cache-") as cold:
            seconds, tar = timed_build(Path(cold))
            size = tar.stat().st_size / 1e6
            print(f"{ROOT} root, cold build (empty cache): {seconds:.1f} s, {size:.0f} MB tar")
    seconds, tar = timed_build(cache_dir())
    print(f"{ROOT} root, warm (cached): {seconds:.2f} s -> {tar}")
    with tempfile.TemporaryDirectory(prefix="unpack-") as work:
        started = time.monotonic()
        root = hostroot.unpack(os.path.join(work, "root"), str(tar), flavour=ROOT)
        elapsed = time.monotonic() - started
        size = sum(f.stat().st_size for f in Path(root.path).rglob("*") if f.is_file() and not f.is_symlink())
        print(f"one test root unpacked: {elapsed:.2f} s, {size / 1e6:.0f} MB of files")
    wanted = set(args.packages.split(",")) if args.packages else None
    print("\n| package | root | phases | agent modes passed |\n| --- | --- | --- | --- |")
    for name, lifecycle in LIFECYCLES.items():
        if wanted is not None and name not in wanted:
            continue
        for flavour in lifecycle.flavours:
            with tempfile.TemporaryDirectory(prefix="lifecycle-") as work:
                started = time.monotonic()
                results = run(new_root(work, flavour, tar), lifecycle)
                took = time.monotonic() - started
                row = f"| {name} | {flavour} | {cell(results)} ({took:.0f} s) | {modes(results)} |"
                print(row, flush=True)
    for name, reason in NOT_HERE.items():
        print(f"| {name} | - | not run: {reason} | |")
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")
    print("reproduce: .venv/bin/python bench/package_roots.py" + (" --warm-only" if args.warm_only else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
