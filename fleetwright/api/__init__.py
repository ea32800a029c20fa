"""Pydantic models for fleetwright's resources and payloads. Pure: no I/O, no clock.

``nodeprofile`` and ``deploymentpolicy`` are the two custom resources (the single source of truth
for their CRDs, see ``crdgen``); ``common`` and ``conditions`` hold shared building blocks;
``keys`` every well-known key; ``validation`` checks what needs more than one object at a time.
The package imports none of them: importing ``keys`` does not build every model.
"""
