"""A Temporal namespace without fleetwright's search attributes (a server started without them, as
``cluster up`` once was): the rollout still runs to completion, and the NodeProfile's status says
which attributes are missing instead of the worker's log alone."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from fleetwright.local.processes import Supervised
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.process.settings import WorkerSettings
from fleetwright.workflows.search import REGISTRATION
from tests.support.engine import label_nodes, simulated_kubelet, unique
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL, Rollout, RunningController, engine_settings
from tests.support.waiting import until

pytestmark = pytest.mark.integration


async def test_missing_search_attributes_are_named_in_the_status_and_the_rollout_completes(
    cluster: ClusterUnderTest, crds: None, tmp_path: Path
) -> None:
    name = unique("nosa")
    with LocalTemporal(workdir=tmp_path / "temporal", ui=False) as bare:  # none registered
        settings = WorkerSettings(
            temporal_address=bare.address,
            temporal_namespace=bare.namespace,
            task_queue=name,
            kubeconfig=cluster.kubeconfig,
            engine=engine_settings(),
        )
        settings_file = tmp_path / "settings.json"
        settings_file.write_text(settings.model_dump_json())
        env = {**os.environ, "FLEETWRIGHT_SETTINGS": str(settings_file)}
        worker = Supervised(
            "worker", [sys.executable, "-m", "fleetwright.cli.main", "worker"], tmp_path / "worker.log", env
        )
        nodes = await asyncio.to_thread(cluster.add_nodes, 2)
        await asyncio.to_thread(label_nodes, cluster, nodes, f"{GROUP_LABEL}={name}")
        policy = {
            "max_unavailable": 1,
            "steps": [{"name": "all", "batches": {"strategy": "fixed", "initial": 1}}],
        }
        rollout = Rollout(cluster, name, name, nodes, policy)
        controller = RunningController(settings)
        worker.start()
        controller.start()
        try:
            with simulated_kubelet(cluster):
                await asyncio.to_thread(rollout.apply)
                await asyncio.to_thread(rollout.wait_ready, 120)
            searchable = rollout.condition("Searchable")
            assert searchable is not None, rollout.status()
            assert (searchable["status"], searchable["reason"]) == ("False", "SearchAttributesMissing")
            for attribute, kind in REGISTRATION.items():
                assert f"--name {attribute} --type {kind}" in searchable["message"]
            assert f"namespace {bare.namespace}" in searchable["message"]
            assert "SearchAttributesMissing" in await until(rollout.event_reasons, 15, "the Warning event")
        finally:
            await controller.stop()
            worker.stop()
            await asyncio.to_thread(rollout.delete)
    log = (tmp_path / "worker.log").read_text()
    assert "lacks the search attributes" in log, log[-2000:]
