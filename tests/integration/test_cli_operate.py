"""The operator CLI against the real control plane and the Temporal dev server, with the worker and
controller running: ``status`` (a drain blocked by a PodDisruptionBudget named with its pod),
``pause``/``resume`` through the annotation, ``logs``, ``history``, ``node reset``, and the failure
acts ``approve``, ``retry-node``, ``skip-node``, ``abort``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.client import Client
from typer.testing import CliRunner

from fleetwright.api.keys import PAUSED_ANNOTATION, state_key, status_label_key
from fleetwright.cli.app import app
from fleetwright.cli.commands import load_all
from fleetwright.local.kwok import STAGE_LOG
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.workflows.ids import rollout_workflow_id
from tests.support.cli import Cli
from tests.support.engine import kubectl_json, unique
from tests.support.providers import ClusterUnderTest
from tests.support.stack import Rollout, RunningController
from tests.support.waiting import until

pytestmark = pytest.mark.integration
load_all()  # every command registered on the app


@pytest.fixture
def cli(cluster: ClusterUnderTest, temporal_server: LocalTemporal) -> Cli:
    return Cli(cluster, temporal_server)


def _block_drains(cluster: ClusterUnderTest, nodes: list[str]) -> tuple[str, str]:
    """A trainer pod on every node and a PDB that allows no disruption: whichever node goes first
    is blocked. The pods are owned by a ConfigMap (no controller acts on it) so the drain evicts
    rather than refusing an unmanaged pod. Returns (namespace, PDB name)."""
    namespace = unique("train")
    cluster.kubectl("create", "namespace", namespace)
    owner = json.loads(
        cluster.kubectl("create", "configmap", "trainer-owner", "-n", namespace, "-o", "json").stdout
    )
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "trainer-owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"trainer-{i}",
                "namespace": namespace,
                "labels": {"app": "trainer"},
                "ownerReferences": [reference],
            },
            "spec": {"nodeName": node, "containers": [{"name": "train", "image": "registry.example/t:1"}]},
        }
        for i, node in enumerate(nodes)
    ]
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "trainer-pdb", "namespace": namespace},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "trainer"}}},
    }
    items = {"apiVersion": "v1", "kind": "List", "items": [*pods, pdb]}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(items))
    return namespace, "trainer-pdb"


def _blocked(view: dict[str, Any]) -> dict[str, Any] | None:
    return next((n for n in view["nodes"] if n["state"] == "Blocked" and "trainer-pdb" in n["message"]), None)


async def test_status_names_the_pdb_and_pod_and_pause_logs_history_reset_work(
    cluster: ClusterUnderTest, cli: Cli, controller: RunningController, rollout: Rollout
) -> None:
    namespace, pdb = await asyncio.to_thread(_block_drains, cluster, rollout.nodes)
    try:
        await _status_pause_logs_history_reset(cluster, cli, rollout, namespace, pdb)
    finally:  # the profile's deletion drains the nodes again: it must not wait on the budget
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


async def _status_pause_logs_history_reset(
    cluster: ClusterUnderTest, cli: Cli, rollout: Rollout, namespace: str, pdb: str
) -> None:
    await asyncio.to_thread(rollout.apply)
    name = rollout.name

    async def blocked() -> dict[str, Any] | None:
        return _blocked(await cli.json("status", name))

    node = await until(blocked, 90, "a node blocked by the PDB in `status -o json`", interval=0.5)
    assert node["stage"] == "drain"
    assert node["reason"] == "DrainBlocked"
    table = await cli.ok("status", name)
    print(table)  # the README's example output
    # The node's branch (long reasons wrap onto continuation lines).
    branch = table[table.index(f"{node['node']}  Blocked") :]
    branch = " ".join(row.strip("│├└─ ") for row in branch.split("\n")[:4])
    assert "DrainBlocked" in branch
    assert f"budget {pdb} " in branch  # the PDB
    assert f"{namespace}/trainer-" in branch  # and the pod, namespaced
    # The NodeProfile shows the held drain too (not only the CLI reading the node's condition):
    # Blocked, nodesBlocked and the node issue name the PDB and the pod.
    held = await until(
        lambda: (c := rollout.condition("Blocked")) and c["status"] == "True" and pdb in c["message"] and c,
        60,
        "the NodeProfile's Blocked condition naming the PDB",
    )
    assert f"{namespace}/trainer-" in held["message"]
    profile_status = await asyncio.to_thread(rollout.status)
    assert profile_status["nodesBlocked"] >= 1
    assert any(pdb in issue["message"] for issue in profile_status["nodeIssues"])
    assert f"NodeProfile {name}" in table
    assert "ETA" in table
    parsed = yaml.safe_load(await cli.ok("status", name, "-o", "yaml"))
    assert parsed["profile"] == name
    assert parsed["targeted"] == 3
    # The profile list reads the status the controller mirrors.
    listing = await cli.json("status")
    assert name in [p["profile"] for p in listing]

    # A running node workflow keeps its records: reset refuses without --force.
    refused = await cli.fails("node", "reset", node["node"], "--profile", name, "--yes")
    assert f"node workflow node/{name}/{node['node']} is running" in refused
    # Nothing ran on the node yet: logs says so, naming what it looked for.
    missing = await cli.fails("logs", name, node["node"])
    assert f"no stage Job of NodeProfile {name} on node {node['node']}" in missing

    # Pause is the annotation (durable), and the controller turns it into the workflow's pause.
    paused = await cli.json("pause", name)
    assert paused["via"] == f"annotation {PAUSED_ANNOTATION}"
    assert rollout.get()["metadata"]["annotations"][PAUSED_ANNOTATION] == "true"
    await until(lambda: (rollout.condition("Paused") or {}).get("status") == "True", 30, "Paused=True")
    assert (await cli.json("status", name))["paused"] is True
    await cli.ok("resume", name)
    assert PAUSED_ANNOTATION not in (rollout.get()["metadata"].get("annotations") or {})
    await until(lambda: (rollout.condition("Paused") or {}).get("status") == "False", 30, "Paused=False")

    # Relax the budget: --watch follows the rollout to its end.
    cluster.kubectl("delete", "pdb", pdb, "-n", namespace)
    watched = await cli.ok("status", name, "--watch", "--interval", "1", "-o", "json")
    final = json.loads(watched[watched.rindex("\n{") + 1 :] if "\n{" in watched else watched)
    assert final["phase"] == "Complete"
    assert final["updated"] == 3
    assert {n["state"] for n in final["nodes"]} == {"Updated"}

    # History: the node workflow in Temporal and each stage Job, with results.
    history = await settled_history(cli, node["node"], name)
    runs = [r for r in history["runs"] if r["profile"] == name]
    assert [r["status"] for r in runs] == ["COMPLETED"]
    assert runs[0]["result"] == "succeeded: complete"
    stages = [(s["stage"], s["result"]) for s in history["stages"] if s["profile"] == name]
    assert stages == [
        ("apply", "Complete"),
        ("config", "Complete"),
        ("interrupt", "Complete"),
        ("post-interrupt", "Complete"),
    ], stages
    recorded = next(r for r in history["recorded"] if r["profile"] == name)
    assert recorded["packages"] == {"tuning": "1.0.0"}
    assert "Complete" in await cli.ok("history", node["node"])

    # Reset: the records go, and the rollout re-runs the node (its record comes back).
    reset = await cli.json("node", "reset", node["node"], "--profile", name, "--yes")
    assert state_key(name) in reset["cleared"]
    assert sum(1 for c in reset["cleared"] if c.startswith("job/fw-tuning-")) == 4
    assert reset["rollout_nudged"] is True
    await until(
        lambda: (
            state_key(name) in _annotations(cluster, node["node"])
            and _label(cluster, node["node"], status_label_key(name)) == "Complete"
        ),
        120,
        "the reset node re-updated",
    )
    history = await settled_history(cli, node["node"], name)
    jobs = [s for s in history["stages"] if s["profile"] == name]
    assert [j["result"] for j in jobs] == ["Complete"] * 4  # the stages ran again, as new Jobs


async def test_logs_print_every_container_of_the_stage_job_through_the_apiserver(
    cluster: ClusterUnderTest, cli: Cli, controller: RunningController, rollout: Rollout
) -> None:
    """The Job and pod are selected as in a real cluster and each container's log is read through
    the apiserver's pods/log proxy (kwok serves a fixed log for the simulated stage pods)."""
    await asyncio.to_thread(rollout.apply)
    await asyncio.to_thread(rollout.wait_ready, 120)
    node = rollout.nodes[0]
    text = await cli.ok("logs", rollout.name, node, "--stage", "apply")
    headers = [line for line in text.splitlines() if line.startswith("==> ")]
    containers = [h.split(" container ")[1].removesuffix(" <==") for h in headers]
    assert containers == ["tuning-init", "tuning-apply", "tuning-applycheck", "done"]  # run order
    assert all(h.startswith("==> apply tuning (Complete) pod/fw-tuning-apply-") for h in headers)
    assert text.count(STAGE_LOG[0]) == 4
    every = await cli.json("logs", rollout.name, node, "--all")
    stages = list(dict.fromkeys(e["stage"] for e in every))
    assert stages == ["apply", "config", "interrupt", "post-interrupt"]  # oldest first
    assert {e["log"] for e in every} == {f"{STAGE_LOG[0]}\n{STAGE_LOG[1]}\n"}
    missing = await cli.fails("logs", rollout.name, node, "--stage", "uninstall")
    assert f"no stage Job of stage uninstall of NodeProfile {rollout.name} on node {node}" in missing
    gone = await cli.fails("logs", rollout.name, node, "--namespace", "default")
    assert "in namespace default" in gone


async def test_approve_retry_skip_and_abort_act_on_a_halted_rollout(
    cluster: ClusterUnderTest,
    cli: Cli,
    temporal_client: Client,
    failing_controller: RunningController,
    rollout: Rollout,
) -> None:
    rollout.policy = {
        "max_unavailable": 1,
        "steps": [
            {"name": "canary", "canary": {"count": 1}},
            {"name": "gate", "approval": {}},
            {"name": "rest", "batches": {"strategy": "fixed", "initial": 2}},
        ],
    }
    await asyncio.to_thread(rollout.apply)
    name = rollout.name

    async def halted() -> dict[str, Any] | None:
        view = await cli.json("status", name)
        return view if view["phase"] == "Halted" else None

    view = await until(halted, 120, "the failing canary to halt the rollout", interval=0.5)
    (canary,) = [n for n in view["nodes"] if n["state"] == "Failed"]
    # The failure names the package and the stage that failed, as nodeIssues does.
    message = canary["message"]
    assert "apply" in message, message
    assert "tuning" in message, message
    assert f"{canary['node']}  Failed" in await cli.ok("status", name)
    others = [n for n in rollout.nodes if n != canary["node"]]

    # Logs after the failure: the failed Job is kept, and its pod's log is still readable.
    failed_logs = await cli.ok("logs", name, canary["node"])
    assert "==> apply tuning (Failed) pod/fw-tuning-apply-" in failed_logs
    assert STAGE_LOG[0] in failed_logs

    # approve: a wrong step is refused naming the policy's steps; the right one is accepted once.
    wrong = await cli.fails("approve", name, "rollout/nonsense")
    assert "unknown approval step 'rollout/nonsense'; this policy has: rollout/gate" in wrong
    approved = await cli.json("approve", name, "rollout/gate")
    assert approved == {
        "profile": name,
        "action": "approve",
        "via": "update approve",
        "result": "approved rollout/gate",
    }
    assert "already approved" in await cli.fails("approve", name, "rollout/gate")

    # retry-node: refused for a node that did not fail, accepted for the failed one.
    assert "has not failed in this rollout" in await cli.fails("retry-node", name, others[0])
    assert "retrying " + canary["node"] in await cli.ok("retry-node", name, canary["node"])

    async def failed_twice() -> list[str] | None:
        history = await cli.json("history", canary["node"])
        applies = [s["result"] for s in history["stages"] if s["profile"] == name and s["stage"] == "apply"]
        return applies if applies == ["Failed", "Failed"] else None

    await until(failed_twice, 120, "the retry to run a new apply Job that fails again", interval=0.5)
    await until(halted, 120, "the rollout to halt again", interval=0.5)

    # skip-node: the failed node no longer holds the rollout.
    assert "skipping " + canary["node"] in await cli.ok("skip-node", name, canary["node"])
    assert "already skipped" in await cli.fails("skip-node", name, canary["node"])

    # abort: the workflow ends Aborted; the CLI then says there is nothing running to act on.
    assert "Abort the rollout" in (await cli.run("abort", name, input="n\n")).stderr
    assert "aborting the rollout of " + name in await cli.ok("abort", name, "--yes")
    handle = temporal_client.get_workflow_handle(rollout_workflow_id(name))
    assert (await asyncio.wait_for(handle.result(), 300))["phase"] == "Aborted"
    assert "is completed, not running" in await cli.fails("retry-node", name, canary["node"])


async def test_unreachable_cluster_or_temporal_is_one_line_naming_the_address(
    cluster: ClusterUnderTest, cli: Cli, tmp_path: Any
) -> None:
    broken = yaml.safe_load(cluster.kubeconfig.read_text())
    broken["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(broken))
    result = await asyncio.to_thread(
        CliRunner().invoke, app, ["--kubeconfig", str(kubeconfig), "status", "anything"]
    )
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: cannot reach the Kubernetes API server at https://127.0.0.1:1")
    result = await asyncio.to_thread(
        CliRunner().invoke, app, ["--temporal-address", "127.0.0.1:1", "approve", "p", "rollout/gate"]
    )
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: cannot reach Temporal at 127.0.0.1:1 (namespace default)")
    missing = await cli.fails("status", unique("nope"))
    assert "NodeProfile 'nope-" in missing
    assert "not found in the cluster at " + cluster.server in missing


async def test_kubectl_fleetwright_runs_the_cli_as_a_plugin(cluster: ClusterUnderTest) -> None:
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(cluster.kubeconfig),
    }
    kubectl = str(venv_bin / "kubectl")
    helped = await asyncio.to_thread(
        subprocess.run,
        [kubectl, "fleetwright", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert helped.returncode == 0, helped.stderr
    for command in (
        "status",
        "pause",
        "resume",
        "approve",
        "abort",
        "retry-node",
        "skip-node",
        "logs",
        "history",
        "node",
    ):
        assert command in helped.stdout
    # The plugin reads the same kubeconfig kubectl does.
    listed = await asyncio.to_thread(
        subprocess.run,
        [kubectl, "fleetwright", "status", "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert isinstance(json.loads(listed.stdout), list)


UNFINISHED = ("Running", "Pending")
"""``history``'s result of a Job the Job controller has not marked finished: its pod runs, or it
has ended and the controller's next sync is still to come."""


async def settled_history(cli: Cli, node: str, profile: str) -> Any:
    """The node's ``history`` once none of the profile's stage Jobs is still running: a stage ends
    once its pod has succeeded, so a node can show Complete a moment before the Job controller's
    next sync marks its last Job Complete."""

    async def settled() -> Any:
        history = await cli.json("history", node)
        running = [s for s in history["stages"] if s["profile"] == profile and s["result"] in UNFINISHED]
        return None if running else history

    return await until(settled, 30, f"no stage Job of {profile} running on {node}", interval=0.5)


def _annotations(cluster: ClusterUnderTest, node: str) -> dict[str, str]:
    return dict(kubectl_json(cluster, "node", node)["metadata"].get("annotations") or {})


def _label(cluster: ClusterUnderTest, node: str, key: str) -> str | None:
    labels: dict[str, str] = kubectl_json(cluster, "node", node)["metadata"].get("labels") or {}
    return labels.get(key)
