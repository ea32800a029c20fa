"""How long the ``fleetwright`` CLI takes to start: the median wall time of a command that does
everything ``fleetwright status P`` does before its first request (interpreter start, imports,
argument parsing), against the root ``--help``, which imports every command module (what every
run imported before commands were loaded lazily, ``fleetwright/cli/commands.py``).

Each run is a fresh interpreter (``python -m fleetwright.cli.main ...``), with bytecode already
compiled by a first, uncounted run. Both the wall time and the CPU time (user + system, which a
loaded machine stretches far less) are printed, with the machine's load average: on a shared
machine the wall time moves with it.

    .venv/bin/python bench/cli_startup.py --runs 15
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

CASES = {
    "status --help (what status P runs before its first request)": ["status", "--help"],
    "--help (imports every command module)": ["--help"],
}


def run_once(args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "fleetwright.cli.main", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=300,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15)
    options = parser.parse_args()
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for label, args in CASES.items():
        run_once(args)  # compiles the bytecode; not counted
        runs = [run_once(args) for _ in range(options.runs)]
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"{label}: median {cpu:.2f} CPU s, {wall:.2f} s wall over {options.runs} runs")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"reproduce: .venv/bin/python bench/cli_startup.py --runs {options.runs}")


if __name__ == "__main__":
    main()
