"""The preflight on the real control plane (``preflight: true``): kwok nodes, real stage Jobs run
by the Job controller, the real activities and workflows. Of two nodes needing the same change,
the one whose checks pass in service is never cordoned and is recorded at the target; the one
whose checks fail is cordoned, updated and uncordoned. The simulated kubelet fails a preflight pod
on the nodes its package's ``SIM_FAIL_PREFLIGHT_ON`` names (``fleetwright/local/stages.yaml``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import Client

from fleetwright.api.keys import NodeReason, condition_type
from fleetwright.api.packageparts import EnvVar
from fleetwright.local import examples
from fleetwright.planner.node.state import read_profile_state
from fleetwright.stagejob.render import PREFLIGHT_ENV
from tests.integration.test_rollout_engine import (  # noqa: F401 (engine: a fixture)
    engine,
    group,
    jobs_of,
    settings,
    start,
)
from tests.support.engine import Sampler, kubectl_json, simulated_kubelet, unique
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL
from tests.support.waiting import until_phase

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]


def unschedulable(cluster: ClusterUnderTest, node: str) -> Any:
    def measure() -> int:
        return int(bool(kubectl_json(cluster, "node", node)["spec"].get("unschedulable")))

    return measure


def is_preflight(job: dict[str, Any]) -> bool:
    containers = job["spec"]["template"]["spec"]["initContainers"]
    wanted = [{"name": k, "value": v} for k, v in PREFLIGHT_ENV.items()]
    return any(all(e in (c.get("env") or []) for e in wanted) for c in containers)


async def test_a_node_whose_checks_pass_is_never_cordoned_and_one_whose_checks_fail_is_updated(
    cluster: ClusterUnderTest,
    temporal_client: Client,
    engine: str,  # noqa: F811
) -> None:
    name, (carrying, lacking) = await asyncio.to_thread(group, cluster, 2)
    built = examples.profile(unique("pre"), selector={GROUP_LABEL: name}, interrupt="reboot")
    package = built.spec.packages[0].model_copy(
        update={"env": [EnvVar(name="SIM_FAIL_PREFLIGHT_ON", value=lacking)]}
    )
    profile = built.model_copy(update={"spec": built.spec.model_copy(update={"packages": [package]})})
    policy = {
        "max_unavailable": 2,
        "preflight": True,
        "steps": [{"name": "all", "batches": {"strategy": "fixed", "initial": 2}}],
    }
    with (
        simulated_kubelet(cluster),
        Sampler(unschedulable(cluster, carrying)) as spared,
        Sampler(unschedulable(cluster, lacking)) as updated,
    ):
        handle = await start(temporal_client, engine, profile, policy, settings())
        done = await until_phase(handle, "Complete", "Halted", within=120)
    assert done.phase == "Complete", done
    assert (done.updated, done.spared) == (2, 1)
    assert spared.samples > 5
    assert spared.worst == 0, "the node whose checks passed was cordoned"
    assert updated.worst == 1, "the node whose checks failed was never cordoned"
    profile_name = profile.metadata.name
    for node in (carrying, lacking):
        meta = kubectl_json(cluster, "node", node)
        record = read_profile_state(meta["metadata"].get("annotations", {}), profile_name).packages["tuning"]
        assert (record.version, record.pending) == ("1.0.0", None), (node, record)
        assert not meta["spec"].get("unschedulable")
    reasons = {
        c["type"]: c.get("reason") for c in kubectl_json(cluster, "node", carrying)["status"]["conditions"]
    }
    assert reasons[condition_type(profile_name)] == NodeReason.PREFLIGHT_PASSED
    jobs = jobs_of(cluster, profile_name)
    ran = {(j["spec"]["template"]["spec"]["nodeName"], is_preflight(j)) for j in jobs}
    # Each node ran its three checks (apply, config, post-interrupt); only the lacking one its stages.
    assert ran == {(carrying, True), (lacking, True), (lacking, False)}, ran
    assert sum(1 for j in jobs if j["spec"]["template"]["spec"]["nodeName"] == carrying) == 3
    assert sum(1 for j in jobs if not is_preflight(j)) == 4  # apply, config, interrupt, post-interrupt
    await handle.terminate("test done")
