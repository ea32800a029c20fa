"""Benchmark: how long the slowest admitted health-check condition takes over the largest admitted
result (``fleetwright.api.healthcondition``: MAX_RESULT values, MAX_STEPS steps), and a dcgm
check's time over that result and over a 2,000-GPU fleet gate.

Reproduce from the repository root with:  .venv/bin/python bench/conditions.py   (--conditions,
--seed)

Candidates are the hand-written worst cases below (the costliest construct per step repeated up to
the budget) and ``--conditions`` random conditions of the grammar (tests/support/conditions.py);
each admitted one is timed on several results of MAX_RESULT values (all zeros, so ``all`` walks
everything; all ones, so ``any`` does; random values), the best of ``--repeat`` runs each, and the
slowest is printed with its steps and nanoseconds per step.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import timeit
from pathlib import Path

from fleetwright.api.gpuchecks import dcgm_checks
from fleetwright.api.healthcondition import (
    MAX_RESULT,
    MAX_STEPS,
    CompiledCondition,
    ConditionError,
    compile_condition,
    evaluate,
)

if not __package__:  # run as a file (python bench/conditions.py): the repository root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import loadavg
from tests.support.conditions import condition, values

WORST_CASES = (
    "all(max(r, 1) >= 1 for r in result)",
    "all(r == 0 for r in result) and all(r >= 0 for r in result) and len(result) > 0",
    "all(abs(r) < 1 and abs(r) < 2 for r in result)",
    "all(r + 1 - 1 + 1 - 1 == 0 for r in result)",
    "len(r for r in result if r == 0) == len(result) and sum(r for r in result) == 0",
    "max(result) < min(result) + 5 and 1 not in result and 2 not in result",
    "any(r > 0 for r in result) or any(r < 0 for r in result) or 5 in result",
)


def timed(compiled: CompiledCondition, result: list[float], repeat: int) -> float:
    """The best of ``repeat`` evaluations, in seconds."""

    def run() -> None:
        # An index out of range or an empty min() is an answer too, and timed.
        with contextlib.suppress(ConditionError):
            evaluate(compiled, result)

    return min(timeit.repeat(run, number=1, repeat=repeat))


def _refused(text: str) -> bool:
    try:
        compile_condition(text)
    except ConditionError:
        return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--conditions", type=int, default=2000, help="random conditions to try")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    results = [[0.0] * MAX_RESULT, [1.0] * MAX_RESULT, values(rng, MAX_RESULT)]
    texts = list(WORST_CASES) + [condition(rng) for _ in range(args.conditions)]
    refused_worst = [text for text in WORST_CASES if _refused(text)]
    if refused_worst:
        raise SystemExit(f"hand-written worst cases over the budget, fix them: {refused_worst}")
    admitted = refused = 0
    worst = (0.0, 0, "")
    for text in texts:
        try:
            compiled = compile_condition(text)
        except ConditionError:
            refused += 1
            continue
        admitted += 1
        for result in results:
            seconds = timed(compiled, result, args.repeat)
            if seconds > worst[0]:
                worst = (seconds, compiled.steps_on(result), text)
    seconds, steps, text = worst
    print(f"{admitted} admitted, {refused} refused of {len(texts)} conditions; result {MAX_RESULT} values")
    per_step = seconds * 1e9 / steps
    print(f"slowest admitted: {seconds * 1e6:.0f} µs, {steps} of {MAX_STEPS} steps ({per_step:.1f} ns/step)")
    print(f"  {text}")
    steady = compile_condition(dcgm_checks()[0].success_condition or "")
    for length in (2000, MAX_RESULT):
        micros = timed(steady, [0.0] * length, args.repeat) * 1e6
        print(f"dcgm {steady.text}: {micros:.0f} µs on {length} values")
    print(loadavg())
    print("reproduce: .venv/bin/python bench/conditions.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
