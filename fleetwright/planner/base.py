"""The model base every planner type and every Temporal payload shares: frozen, tolerant of fields
it does not know, JSON-serialisable.

Planner types travel as Temporal payloads and as ``fleetwright plan -o json`` output, so they must
round-trip through JSON unchanged. Owns nothing else; must not do I/O.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """An immutable value. Equal inputs give equal (and equally serialised) values.

    Every model that travels through Temporal and is not an API model is a ``Frozen``: workflow
    and activity inputs and results, signals, updates, queries and the memo (``workflows.payloads``,
    ``activities.payloads``, the planner types they carry). They ignore a field they do not know
    (``extra="ignore"``), so a release reads what a newer one wrote, during a rolling update or
    after a downgrade, leaving out only what it cannot act on.

    The API models users write (``fleetwright.api``'s ``ApiModel``: the CRDs, what admission
    reads) are not ``Frozen`` and refuse an unknown field, naming it, also where a payload carries
    them (a rollout's NodeProfile and DeploymentPolicy): a field added to them is still written
    only when used (``api.compat.added_fields``). Decided per model where one is both: the
    planner's policy and selectors are converted from the API models, never written by users, so
    they are payloads; ``EngineSettings`` travels in every workflow input (tolerant) and is written
    by operators in the worker's settings, which refuse an unknown engine key themselves
    (``WorkerSettings``) and whose chart schema stays closed.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")
