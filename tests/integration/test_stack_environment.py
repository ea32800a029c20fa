"""The local stack's processes take their settings from the stack, not from the shell: a stack
started from a shell that sourced another stack's env file (its ``FLEETWRIGHT_*`` exports, which
override a settings file) still runs its worker and controller against its own Temporal server and
API server."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetwright.local.controlplane import ClusterOptions, LocalCluster
from fleetwright.local.loopback import free_port
from fleetwright.local.stack import LocalStack, StackOptions
from fleetwright.local.temporalserver import LocalTemporal
from tests.support.engine import label_nodes, unique
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL, Rollout, engine_settings

pytestmark = pytest.mark.integration


def exported(pid: int) -> dict[str, str]:
    """A running process's environment."""
    pairs = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    return dict(pair.split("=", 1) for pair in pairs if "=" in pair)


@pytest.mark.timeout(600)
def test_a_stack_started_from_another_stacks_shell_uses_its_own_servers(
    cluster: ClusterUnderTest,
    temporal_server: LocalTemporal,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert isinstance(cluster, LocalCluster), "the local stack attaches to the local control plane"
    # What `source <another stack>/env` exports (nothing listens at that address), and an override
    # of a setting the env file does not name.
    other = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("FLEETWRIGHT_TEMPORAL_ADDRESS", other)
    monkeypatch.setenv("FLEETWRIGHT_TEMPORAL_NAMESPACE", "another-stack")
    monkeypatch.setenv("FLEETWRIGHT_KUBECONFIG", str(tmp_path / "another-stack" / "kubeconfig"))
    name = unique("stackenv")
    nodes = cluster.add_nodes(1)
    label_nodes(cluster, nodes, f"{GROUP_LABEL}={name}")
    rollout = Rollout(cluster, name, name, nodes, {})
    options = StackOptions(
        cluster=ClusterOptions(),
        workdir=tmp_path / "stack",
        engine=engine_settings(),
        ui=False,
        webhook=False,
    )
    with LocalStack(options, attached=(cluster, temporal_server)) as stack:
        for role in ("worker", "controller"):
            process = stack.processes[role]
            assert process.pid is not None
            environment = exported(process.pid)
            assert [key for key in environment if key.startswith("FLEETWRIGHT_")] == ["FLEETWRIGHT_SETTINGS"]
        try:
            rollout.apply()
            rollout.wait_ready(timeout=180)
            assert rollout.status()["phase"] == "Complete"
            assert rollout.recorded_versions() == {"1.0.0"}
        finally:
            rollout.delete()
