"""The pure planner: per-node work and rollout decisions from data and ``now``. No I/O, no clock."""
