"""Reading a stage pod for ``fleetwright logs``: containers that never ran are named with the
reason they wait, because the kubelet has no log of them (a real kubelet answers 400)."""

from __future__ import annotations

import pytest
from kubernetes import client

from fleetwright.kube import stagelogs

pytestmark = pytest.mark.unit


def status(
    name: str, state: client.V1ContainerState, last: client.V1ContainerState | None = None
) -> client.V1ContainerStatus:
    return client.V1ContainerStatus(
        name=name, image="i", image_id="", ready=False, restart_count=0, state=state, last_state=last
    )


def test_a_failed_step_leaves_the_check_and_main_container_never_started() -> None:
    terminated = client.V1ContainerState(terminated=client.V1ContainerStateTerminated(exit_code=1))
    waiting = client.V1ContainerState(waiting=client.V1ContainerStateWaiting(reason="PodInitializing"))
    inits = [
        status("copy", client.V1ContainerState(terminated=client.V1ContainerStateTerminated(exit_code=0))),
        status("apply", terminated),
        status("applycheck", waiting),
    ]
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="p", namespace="fleetwright-system"),
        spec=client.V1PodSpec(
            init_containers=[client.V1Container(name=n) for n in ("copy", "apply", "applycheck")],
            containers=[client.V1Container(name="done")],
        ),
        status=client.V1PodStatus(
            phase="Failed",
            init_container_statuses=inits,
            container_statuses=[status("done", waiting)],
        ),
    )
    read = stagelogs._pod(pod)
    assert read.containers == ("copy", "apply", "applycheck", "done")
    assert read.never_started == {"applycheck": "PodInitializing", "done": "PodInitializing"}
    # A container waiting to restart after it ran has a log: it is read, not skipped.
    inits[1] = status("apply", waiting, last=terminated)
    assert "apply" not in stagelogs._pod(pod).never_started
