"""fleetwright upgraded with rollouts in flight (docs/upgrading.md): the previous release's worker
and controller, run from its commit in git history, drive rollouts on the local control plane;
while one waits at an approval gate, one soaks and one has a node in its reboot stage, the current
code's processes take over, by a stop-and-start upgrade or side by side as a rolling update runs
both. Every rollout completes, with exactly one Job per node, package, version and stage, the
chaos suite's invariants hold, and no workflow history has a failed workflow task."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from fleetwright.chaos.invariants import check_run
from fleetwright.chaos.iteration import IterationPlan
from fleetwright.chaos.runner import engine_settings, manifests
from fleetwright.chaos.snapshot import Snapshot
from fleetwright.chaos.system import GROUP_LABEL, ChaosStack
from fleetwright.chaos.watcher import Watcher
from fleetwright.kube.client import from_kubeconfig
from fleetwright.local.controlplane import LocalCluster
from fleetwright.local.nodes import stage_pod_timing
from fleetwright.local.processes import Supervised
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.process.settings import SETTINGS_ENV, WorkerSettings
from tests.support.chaosplans import rebooting_plan
from tests.support.cli import Cli
from tests.support.providers import ClusterUnderTest
from tests.support.releases import REPO, checkout, history_problems, previous, release_path
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

NODES = 3
BATCHES = {"name": "rest", "batches": {"strategy": "fixed", "initial": 2}}
PLANS = {
    "gate": (
        {"name": "canary", "canary": {"count": 1}},
        {"name": "gate", "approval": {}},
        BATCHES,
    ),
    "soak": (
        {"name": "canary", "canary": {"count": 1}},
        {"name": "watch", "soak": {"durationSeconds": 40}},
        BATCHES,
    ),
    "reboot": (BATCHES,),
}
# Stages long enough that the upgrade finds a node inside one.
STAGE_SECONDS = 3.0
DEADLINE_SECONDS = 400.0
SIDE_BY_SIDE_SECONDS = 20.0


def plan(index: int, steps: tuple[dict[str, Any], ...]) -> IterationPlan:
    return rebooting_plan(32, index, NODES, steps)


class Release:
    """One release's worker and controller as the chart runs them (``fleetwright worker`` and
    ``fleetwright controller``), from a source tree: the previous release's checkout, or this one."""

    def __init__(self, stack: ChaosStack, label: str, tree: Path | None) -> None:
        env = dict(stack.worker.env or {})
        if tree is not None:
            env.update(release_path(tree))
            env[SETTINGS_ENV] = str(settings_for_previous(stack.stack.settings_path))
            imported = subprocess.run(
                [sys.executable, "-c", "import fleetwright.workflows.rollout as r; print(r.__file__)"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            assert Path(imported.strip()).is_relative_to(tree), imported
        self.processes = [
            Supervised(f"{role}-{label}", piece.argv, stack.stack.log_dir / f"{role}-{label}.log", env)
            for role, piece in (("worker", stack.worker), ("controller", stack.controller))
        ]

    def start(self) -> None:
        for process in self.processes:
            process.start()

    def stop(self) -> None:
        for process in self.processes:
            process.stop()


def settings_for_previous(path: Path) -> Path:
    """The stack's settings as the previous release's chart renders them: only what is set, so a
    setting this release added (with its default) does not reach a release that refuses it."""
    settings = WorkerSettings.model_validate_json(path.read_text())
    previous_path = path.with_name("settings-previous.json")
    previous_path.write_text(json.dumps(settings.model_dump(mode="json", exclude_defaults=True)))
    return previous_path


@dataclass
class UpgradeOutcome:
    violations: dict[str, list[str]]
    """The chaos invariants broken, by rollout."""
    problems: list[str]
    """What went wrong in the Temporal histories (``history_problems``)."""

    def check(self) -> None:
        assert not any(self.violations.values()), self.violations
        assert self.problems == []


class Upgrade:
    """Three rollouts under one stack, watched from before the first apply to their end."""

    def __init__(self, stack: ChaosStack, cli: Cli, prefix: str) -> None:
        self.stack, self.cli = stack, cli
        self.names = {kind: f"{prefix}-{kind}" for kind in PLANS}
        self.plans = {kind: plan(i, steps) for i, (kind, steps) in enumerate(PLANS.items())}
        api = from_kubeconfig(stack.cluster.kubeconfig)
        self.watchers = {
            kind: Watcher(api, name, f"{GROUP_LABEL}={name}") for kind, name in self.names.items()
        }

    def apply(self) -> None:
        for kind, name in self.names.items():
            self.stack.add_group(name, NODES)
            self.watchers[kind].__enter__()
            self.stack.cluster.kubectl("apply", "-f", "-", input=manifests(name, self.plans[kind]))

    def latest(self, kind: str) -> Snapshot | None:
        timeline = self.watchers[kind].timeline
        return timeline[-1] if timeline else None

    def until(self, what: str, predicate: Callable[[], bool]) -> None:
        wait_for(predicate, DEADLINE_SECONDS, what)

    def in_flight(self) -> bool:
        """The gate rollout waits for approval and the soak one soaks (each with its canary done
        and nothing else started), and a node of the reboot one is in its reboot stage (its
        interrupt Job made, its post-interrupt one not yet)."""
        gate, soak, reboot = (self.latest(kind) for kind in PLANS)
        if gate is None or soak is None or reboot is None:
            return False
        canaries_wait = waiting_after_canary(gate) and waiting_after_canary(soak)
        return canaries_wait and any(rebooting(reboot, node.name) for node in reboot.nodes)

    def phase(self, kind: str) -> str:
        latest = self.latest(kind)
        return latest.profile.phase if latest and latest.profile else ""

    def in_flight_on(self, release: Release) -> None:
        """Start ``release``, apply the rollouts, wait until a gate, a soak and a reboot are in
        flight."""
        release.start()
        self.apply()
        self.until("a gate, a soak and a reboot in flight", self.in_flight)

    def move_to(self, current: Release, replacing: Release | None = None) -> None:
        """Upgrade: stop ``replacing`` (none: both run, as during a rolling update), apply the
        current CRDs first as an operator does (Helm never changes them), start ``current``."""
        if replacing is not None:
            replacing.stop()
        self.stack.cluster.kubectl("apply", "-f", str(REPO / "crds"))
        current.start()

    def conclude(self) -> UpgradeOutcome:
        """Wait for every rollout to complete, read what went wrong, and remove them."""
        violations = self.finish()
        problems = asyncio.run(rollout_problems(self.stack, self))
        self.remove()
        return UpgradeOutcome(violations, problems)

    def approve(self) -> None:
        approved = self.cli.invoke("approve", self.names["gate"], "rollout/gate")
        assert approved.exit_code == 0, approved.output

    def past_the_gate(self) -> bool:
        gate = self.latest("gate")
        return gate is not None and len({job.node for job in gate.jobs}) > 1

    def remove(self) -> None:
        """Delete the profiles (the running release releases their finalizers) and their nodes,
        so the session's later stacks can use the same node names."""
        names = self.names.values()
        kubectl = self.stack.cluster.kubectl
        kubectl("delete", *(f"nodeprofile/{name}" for name in names), "--timeout=120s", timeout=180)
        kubectl("delete", *(f"deploymentpolicy/{name}" for name in names), "--timeout=60s")
        for name in self.names.values():
            kubectl("delete", "nodes", "-l", f"{GROUP_LABEL}={name}", "--timeout=60s")

    def finish(self) -> dict[str, list[str]]:
        """Wait for every rollout to complete; the invariants' violations, by rollout."""
        self.until("every rollout complete", lambda: all(self.phase(k) == "Complete" for k in PLANS))
        violations = {}
        for kind, watcher in self.watchers.items():
            watcher.final()
            watcher.__exit__(None, None, None)
            found = check_run(watcher.timeline, self.names[kind], max_unavailable=2)
            violations[kind] = [str(v) for v in found]
        return violations


def waiting_after_canary(snap: Snapshot) -> bool:
    nodes = {job.node for job in snap.jobs}
    if len(nodes) != 1:
        return False
    (canary,) = nodes
    view = snap.node(canary)
    return view is not None and not view.unschedulable and not view.working(snap.jobs[0].profile)


def rebooting(snap: Snapshot, node: str) -> bool:
    stages = {job.stage for job in snap.jobs if job.node == node}
    return "interrupt" in stages and "post-interrupt" not in stages


async def rollout_problems(stack: ChaosStack, upgrade: Upgrade) -> list[str]:
    """``history_problems`` of the rollouts and their node workflows."""
    client = await Client.connect(stack.temporal.address, namespace=stack.temporal.namespace)
    ids = []
    for kind, name in upgrade.names.items():
        final = upgrade.latest(kind)
        nodes = sorted({job.node for job in final.jobs}) if final else []
        assert len(nodes) == NODES, (name, nodes)
        ids += [f"nodeprofile/{name}", *(f"node/{name}/{node}" for node in nodes)]
    return await history_problems(client, ids)


@dataclass
class Previous:
    """The stack running the previous release's worker and controller (and its CRDs)."""

    stack: ChaosStack
    release: Release
    cli: Cli


@pytest.fixture
def previous_release(
    cluster: ClusterUnderTest, temporal_server: LocalTemporal, tmp_path: Path
) -> Iterator[Previous]:
    assert isinstance(cluster, LocalCluster), "the upgrade test runs processes against the local provider"
    tree = checkout(previous(), tmp_path)
    with ChaosStack(workdir=tmp_path / "stack", attached=(cluster, temporal_server)) as stack:
        engine = engine_settings(plan(0, ()))
        timing = stage_pod_timing(STAGE_SECONDS, ready_seconds=0.1)
        stack.configure(engine.model_copy(update={"stage_pod_annotations": timing}))
        stack.worker.stop()
        stack.controller.stop()
        stack.cluster.kubectl("apply", "-f", str(tree / "crds"))
        yield Previous(stack, Release(stack, "previous", tree), Cli(cluster, temporal_server))


def test_a_stop_and_start_upgrade_mid_rollout_completes_every_rollout(previous_release: Previous) -> None:
    old = previous_release.release
    upgrade = Upgrade(previous_release.stack, previous_release.cli, "upg")
    current = Release(previous_release.stack, "current", None)
    upgrade.in_flight_on(old)
    upgrade.move_to(current, replacing=old)
    try:
        upgrade.approve()
        outcome = upgrade.conclude()
    finally:
        current.stop()
    outcome.check()


def test_both_releases_side_by_side_complete_every_rollout(previous_release: Previous) -> None:
    old = previous_release.release
    upgrade = Upgrade(previous_release.stack, previous_release.cli, "side")
    current = Release(previous_release.stack, "current", None)
    upgrade.in_flight_on(old)
    upgrade.move_to(current)
    try:
        # Both take tasks, as during a rolling update, until the old pods are gone.
        upgrade.approve()
        time.sleep(SIDE_BY_SIDE_SECONDS)
        old.stop()
        outcome = upgrade.conclude()
    finally:
        old.stop()
        current.stop()
    outcome.check()


def test_a_downgrade_after_an_upgrade_completes_every_rollout(previous_release: Previous) -> None:
    """docs/upgrading.md, "Downgrading": the previous release carries on every workflow that ran
    no change of the newer one (the newer release's changes here take no patch marker on these
    paths; one that does must make this test expect the stall it documents)."""
    old = previous_release.release
    upgrade = Upgrade(previous_release.stack, previous_release.cli, "down")
    current = Release(previous_release.stack, "current", None)
    upgrade.in_flight_on(old)
    upgrade.move_to(current, replacing=old)
    try:
        upgrade.approve()
        upgrade.until("the gate's next batch", upgrade.past_the_gate)
        current.stop()
        old.start()  # the CRDs stay the newer release's: a downgrade never changes them
        outcome = upgrade.conclude()
    finally:
        current.stop()
        old.stop()
    outcome.check()
