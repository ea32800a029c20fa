"""The pure planner: per-node work and rollout decisions from data and ``now``. No I/O, no clock,
no randomness; every type is a frozen pydantic model that round-trips through JSON.

One folder per concept, layered (an import contract holds it): ``profile`` (questions across the
profiles sharing a node: priority, runtime taint) above ``convert`` (the one way in from the API
models), above ``rollout`` (the engine, its state, the fleet snapshot it reads and the plan
preview), above ``health`` (health-check analysis), ``node`` (one node's packages, work and
recorded state) and ``policy`` (a DeploymentPolicy's steps, selectors and windows), above
``base`` (the model base they share).

Public API (what the rollout workflow calls):
- ``convert.rollout_spec(profile, policy) -> RolloutSpec`` from the API models.
- ``rollout.snapshot.observe_fleet(nodes, profile, targeted) -> tuple[NodeObservation, ...]`` from
  Node dicts (labels, Ready, foreign cordons, this profile's recorded state, other profiles at work).
- ``rollout.lifecycle.begin(spec, now) -> RolloutState``; ``rollout.lifecycle.retarget(state, spec,
  now)`` on a spec change.
- ``rollout.decision.decide(state, Observations(...), now) -> Decision``: ``decision.start`` (nodes
  to start now, each with its ``NodeWork``), ``decision.state`` (keep it), ``decision.wake_at``
  (call again then at the latest), ``phase``/``message``/``blocked``/``counts`` for status.
- ``node.work.plan_node(graph, records) -> NodeWork``: the stages of one node, in order.
- ``node.state.format_annotation`` / ``parse_annotation``: the per-node state the engine records.
- ``rollout.preview.preview(spec, observations, now) -> Plan``: what ``fleetwright plan`` prints.
"""
