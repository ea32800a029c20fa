"""``fleetwright chaos``: seeded chaos iterations against a local fleet (control plane, Temporal dev
server, worker and controller as separate processes), with the invariant checker watching; prints
the seed, each iteration and the totals, and exits non-zero on any violation.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import TYPE_CHECKING, Annotated

import typer

from fleetwright.chaos.iteration import Fault, draw
from fleetwright.cli.app import app

if TYPE_CHECKING:
    from rich.console import Console

    from fleetwright.chaos.runner import IterationResult, Totals


def describe(result: IterationResult) -> str:
    plan = result.plan
    faults = ", ".join(
        f"{i.fault.value}@{a.at:.0f}s{'→' + i.target if i.target else ''}"
        for i, a in zip(result.injected, plan.injections, strict=False)
    )
    verdict = "ok" if not result.violations else f"{len(result.violations)} VIOLATION(S)"
    return (
        f"#{plan.index} {result.profile}: {plan.nodes} nodes, maxUnavailable {plan.max_unavailable}, "
        f"stages {plan.outcome.value}, faults [{faults}] -> {result.phase or 'no status'} "
        f"in {result.seconds:.0f}s ({result.snapshots} snapshots"
        + (f"; restarted after exiting: {', '.join(result.revived)}" if result.revived else "")
        + f"): {verdict}"
    )


def print_result(console: Console, result: IterationResult) -> None:
    console.print(describe(result), markup=False)
    for violation in result.violations:
        console.print(f"    VIOLATION {violation}", markup=False, style="red")


def print_totals(console: Console, seed: int, totals: Totals) -> None:
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(totals.faults.items())) or "none"
    console.print(
        f"seed {seed}: {totals.iterations} iterations in {totals.seconds:.0f}s; "
        f"rollouts completed {totals.completed}, halted {totals.halted}; "
        f"faults {sum(totals.faults.values())} ({kinds}); violations {totals.violations}; "
        f"processes restarted after exiting on their own: {sum(totals.revived.values())}"
    )


@app.command("chaos")
def chaos(  # noqa: PLR0917 - typer maps each parameter to one option
    seed: Annotated[
        int | None, typer.Option(help="Seed of every random draw (random when omitted; always printed).")
    ] = None,
    iterations: Annotated[int, typer.Option(min=1, help="Rollouts to run, each with its own faults.")] = 10,
    outage_seconds: Annotated[
        float,
        typer.Option(
            help="How long Temporal stays unreachable (the issue's minute; lower only to save time)."
        ),
    ] = 60.0,
    stop_after: Annotated[
        float | None,
        typer.Option(help="Start no iteration after this many seconds (the totals say how many ran)."),
    ] = None,
    first_iteration: Annotated[int, typer.Option(min=0, help="Resume a seed's run at this iteration.")] = 0,
    fault: Annotated[
        list[Fault] | None, typer.Option(help="Only these fault kinds (repeatable; default all).")
    ] = None,
) -> None:
    """Seeded chaos: real rollouts while processes are killed and nodes edited; checks every invariant."""
    from fleetwright.chaos.runner import run
    from fleetwright.chaos.system import ChaosStack
    from fleetwright.cli.text import human_console

    console = human_console()
    logging.getLogger("fleetwright").setLevel(logging.ERROR)
    chosen = seed if seed is not None else secrets.randbelow(2**31)
    console.print(f"chaos seed {chosen} (rerun with --seed {chosen})")
    kinds = tuple(fault) if fault else tuple(Fault)
    plans = [
        draw(chosen, i, outage_seconds=outage_seconds, faults=kinds)
        for i in range(first_iteration, first_iteration + iterations)
    ]
    started = time.monotonic()
    with ChaosStack() as stack:
        console.print(
            f"stack up in {time.monotonic() - started:.0f}s (logs in {stack.workdir})", highlight=False
        )
        totals = run(
            stack, plans, report=lambda result: print_result(console, result), stop_after_seconds=stop_after
        )
    print_totals(console, chosen, totals)
    raise typer.Exit(1 if totals.violations else 0)
