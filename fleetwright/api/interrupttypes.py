"""The interrupt types a NodeProfile package can ask for (reboot, service, restartAllServices,
noop): their names, the agent's spelling that is accepted too, and the schema that lists both.
Must not do I/O.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, WithJsonSchema

InterruptTypeName = Literal["reboot", "service", "restartAllServices", "noop"]
# The agent (and some package READMEs) spell it restart_all_services; both are accepted.
INTERRUPT_TYPE_SPELLINGS: dict[str, InterruptTypeName] = {
    "reboot": "reboot",
    "service": "service",
    "restartAllServices": "restartAllServices",
    "restart_all_services": "restartAllServices",
    "noop": "noop",
}
INTERRUPT_RANK: dict[str, int] = {"reboot": 3, "restartAllServices": 2, "service": 1, "noop": 0}


def _normalize_interrupt_type(value: object) -> object:
    if isinstance(value, str):
        return INTERRUPT_TYPE_SPELLINGS.get(value, value)
    return value


InterruptType = Annotated[
    InterruptTypeName,
    BeforeValidator(_normalize_interrupt_type),
    WithJsonSchema({"type": "string", "enum": list(INTERRUPT_TYPE_SPELLINGS)}),
]
