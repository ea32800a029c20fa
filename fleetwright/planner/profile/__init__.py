"""Questions across the NodeProfiles sharing a node: which profile goes first there (``priority``)
and which profiles still hold the runtime-required taint (``runtime``)."""
