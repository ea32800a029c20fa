"""The rollout engine: ``decide(state, observations, now) -> Decision``.

Each call folds the observed outcomes of running nodes into the state, applies the failure rules,
then walks the steps (rollout-wide gates first, then every compartment's own steps) and returns
which nodes to start now, the new state, and when to call again. It is a pure function of its
arguments: same inputs, same decision; no I/O, no clock, no randomness.

Invariants (each is a property test):
- a start never takes the unavailable count past ``maxUnavailable`` (profile-wide or per
  compartment); nodes unavailable for other reasons count.
- canary nodes finish before any other node starts; a failed canary halts.
- a halt is absorbing: a halted state never starts a node again (a new target starts a new state).
- a node starts only if its expected duration fits the rest of an open window.
- a rollout is never Blocked on its own failed nodes alone: when a budget refuses a start and only
  nodes this rollout failed on (left cordoned) hold it, the failure rule fires.

How the engine uses it: keep the state; whenever a child finishes, a signal arrives or ``wake_at``
passes, observe and call ``decide``; start ``decision.start``; store ``decision.state``. A spec
change goes through ``retarget``.

The engine is split by what each part does, the way a rollout controller splits its step kinds:
``lifecycle`` (begin, retarget, begin_rollback), ``decision`` (``decide`` and the ``Decision`` it
assembles), ``outcomes`` (folding finished runs in), ``failures`` (the failure rules), ``walk``
(the steps in order), one module per step kind (``canary``, ``soak``, ``approval``, ``batching``),
``refusals`` (why a node may not start), ``working`` (one call's working sets) and ``engine``
(what the steps do with them). Beside the engine: the state it carries between calls (``state``),
what it observes (``observations``, read from a fleet snapshot by ``snapshot``) and reads of the
fleet (``targets``, ``ordering``, ``budget``), the fleet gate's due checks (``fleetgate``),
batch sizing (``sizing``), the spec (``spec``), the rollback plan (``rollback``) and the plan
preview that runs it (``preview``).
"""
