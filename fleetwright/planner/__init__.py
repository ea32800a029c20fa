"""The pure planner: per-node work and rollout decisions from data and ``now``. No I/O, no clock,
no randomness; every type is a frozen pydantic model that round-trips through JSON.

Public API (what the rollout workflow calls):
- ``convert.rollout_spec(profile, policy) -> RolloutSpec`` from the API models.
- ``fleet.observe_fleet(nodes, profile, targeted) -> tuple[NodeObservation, ...]`` from Node dicts
  (labels, Ready, foreign cordons, this profile's recorded state, other profiles at work).
- ``rollout.begin(spec, now) -> RolloutState``; ``rollout.retarget(state, spec, now)`` on a spec change.
- ``rollout.decide(state, Observations(...), now) -> Decision``: ``decision.start`` (nodes to start
  now, each with its ``NodeWork``), ``decision.state`` (keep it), ``decision.wake_at`` (call again
  then at the latest), ``phase``/``message``/``blocked``/``counts`` for status.
- ``nodework.plan_node(graph, records) -> NodeWork``: the stages of one node, in order.
- ``nodestate.format_annotation`` / ``parse_annotation``: the per-node state the engine records.
- ``preview.preview(spec, observations, now) -> Plan``: what ``fleetwright plan`` prints.
"""
