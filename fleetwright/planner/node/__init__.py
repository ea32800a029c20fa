"""One node's side of a rollout: a profile's desired packages and their dependency graph
(``packages``), the work a node needs (``work``: actions, stages, interrupts), the package state
recorded on it (``state``, ``ledger``), the stage names (``stages``), interrupts (``interrupts``),
the preflight (``preflight``) and how long the work is expected to take (``durations``)."""
