"""Payload compatibility with the previous release: fields a release adds to a payload model are
left out of its serialized form while they hold their default.

0.1.0's payload models refuse unknown fields, so its worker (during a rolling update, or after a
downgrade) fails on a payload that carries a field it does not know, even an empty one. From the
release after it, payload models ignore unknown fields (``planner.base.Frozen``), but the API
models a payload carries (a rollout's NodeProfile and DeploymentPolicy) refuse them in every
release. So a field added to a payload model (while a supported release refuses unknown ones) or
to an API model is listed here: left out while unused, it costs nothing to a rollout that does
not use it, whose payload is what the previous release wrote. Owns only that serializer; no I/O.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer


def added_fields(*names: str) -> Any:
    """A wrap model serializer, assigned in a model's class body, that drops ``names`` (and their
    aliases) from the serialized form while each holds its default."""

    def serialize(self: BaseModel, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if not isinstance(data, dict):
            return data
        fields = type(self).model_fields
        for name in names:
            field = fields[name]
            if getattr(self, name) == field.get_default(call_default_factory=True):
                data.pop(name, None)
                if field.alias is not None:
                    data.pop(field.alias, None)
        return data

    return model_serializer(mode="wrap")(serialize)
