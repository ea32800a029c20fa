"""The model base every planner type shares: frozen, strict about unknown fields, JSON-serialisable.

Planner types travel as Temporal payloads and as ``fleetwright plan -o json`` output, so they must
round-trip through JSON unchanged. Owns nothing else; must not do I/O.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """An immutable value. Equal inputs give equal (and equally serialised) values."""

    model_config = ConfigDict(frozen=True, extra="forbid")
