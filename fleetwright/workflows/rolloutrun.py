"""What one run of the rollout workflow keeps in memory (``RolloutRun``): the profile and policy it
rolls out, the planner state, the humans' controls, the requests and node reports not yet folded
in; and what a run hands the next one when it continues as new. The workflow's parts
(``turn``, ``noderuns``, ``sleeping``, ``retargeting``, ``deletion``, ``controls``,
``visibility``) read and change it; none of them keeps state of its own."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fleetwright.api.deploymentpolicy import DeploymentPolicy
    from fleetwright.api.nodeprofile import NodeProfile
    from fleetwright.planner import convert
    from fleetwright.planner.campaign import ClusterReport
    from fleetwright.planner.rollout.spec import RolloutSpec
    from fleetwright.planner.rollout.state import BlockedNode, RolloutState
    from fleetwright.workflows.payloads import ImagePins, NodeResult, Progress, RolloutInput


class RolloutRun:
    """The memory of one run of the rollout workflow; ``carry`` is what the next run starts from."""

    def __init__(self, rollout: RolloutInput) -> None:
        # From the input before any handler runs: a run continued as new gets the signals sent
        # during the hand-over (node reports, a pause) in its first activation, ahead of ``run``.
        self.results: list[NodeResult] = list(rollout.results)
        self.controls = rollout.controls
        self.profile = rollout.profile
        self.policy = rollout.policy
        self.settings = rollout.settings
        self.previous = rollout.previous
        # A policy of None keeps the current one (a deletion that outlived its policy).
        self.new_spec: tuple[NodeProfile, DeploymentPolicy | None] | None = None
        # A signal or update asks for a decision now: the next turn waits for no timer or pacing.
        self.decide_now = False
        # When the last observe-and-decide activity was asked for and when it answered.
        self.last_turn: tuple[datetime, datetime] | None = None
        # The planner state: None until ``run`` begins (an update validated before then sees none).
        self.state: RolloutState | None = None
        self.progress: Progress | None = None
        self.retry: list[str] = []
        # Failed nodes a human released (``release_node``), not yet uncordoned.
        self.releases: list[str] = []
        self.abort_sent: set[str] = set()
        self.fresh_pass = False
        self.held: tuple[BlockedNode, ...] = ()
        self.unregistered: tuple[str, ...] = ()
        # When the running nodes' workflows were last looked up, and the failures made up for
        # those found ended without finishing (their nodes are shown failed on the next turn).
        self.ended_checked_at: datetime | None = None
        self.ended: list[NodeResult] = []
        # The current generation's image digests (``pinning``), and a generation refused because
        # an image does not exist: (generation, why).
        self.pins: ImagePins | None = rollout.pins
        self.refused: tuple[int, str] | None = None
        # What a campaign's member rollout last reported to its campaign (``campaignreport``).
        self.reported: ClusterReport | None = None

    def spec(self) -> RolloutSpec:
        return convert.rollout_spec(
            self.profile, self.policy, removing=self.controls.deleting, previous=self.previous
        )

    def should_continue_as_new(self) -> bool:
        # Requests not yet reported in (a spec change, a retry, a release) are handled first: only the state,
        # the controls and node results travel to the next run.
        if self.new_spec is not None or self.retry or self.releases:
            return False
        info = workflow.info()
        return (
            info.get_current_history_length() >= self.settings.history_events_before_continue
            or info.get_current_history_size() >= self.settings.history_bytes_before_continue
        )

    def memo(self) -> dict[str, Any]:
        return {"progress": self.progress.model_dump(mode="json")} if self.progress is not None else {}

    def carry(self) -> RolloutInput:
        """The next run's input: the state, the controls and the node results not yet folded in."""
        assert self.state is not None
        return RolloutInput(
            profile=self.profile,
            policy=self.policy,
            previous=self.previous,
            settings=self.settings,
            state=self.state,
            controls=self.controls,
            results=tuple(self.results),
            pins=self.pins,
        )
