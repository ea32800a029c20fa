"""Every model that travels through Temporal reads a payload carrying a field it does not know (a
newer release wrote it) and ignores that field; the API models users write still refuse one,
naming it (planner.base.Frozen, docs/upgrading.md). The models are found from the workflows' and
activities' handlers (inputs and results, signals, updates, queries, whose ``progress`` is also
the memo) and every model their fields reach, so a new one cannot be left out."""

from __future__ import annotations

import types
import typing

import pytest
from pydantic import BaseModel, ValidationError

from fleetwright.api.common import ApiModel
from fleetwright.process.settings import WorkerSettings
from tests.support.releasereader import handlers

pytestmark = pytest.mark.unit

UNKNOWN = "writtenByANewerRelease"


def _models(hint: object, found: set[type[BaseModel]]) -> None:
    if typing.get_origin(hint) is not None or isinstance(hint, types.UnionType):
        for arg in typing.get_args(hint):
            _models(arg, found)
    elif isinstance(hint, type) and issubclass(hint, BaseModel) and hint not in found:
        found.add(hint)
        for field in hint.model_fields.values():
            _models(field.annotation, found)


def travelling() -> list[type[BaseModel]]:
    """Every model in a handler's signature of the current workflows and activities, and every
    model their fields reach."""
    found: set[type[BaseModel]] = set()
    for arguments, result in handlers().values():
        for hint in (*(arguments or ()), result):
            _models(hint, found)
    return sorted(found, key=lambda model: f"{model.__module__}.{model.__qualname__}")


MODELS = travelling()
PAYLOADS = [model for model in MODELS if not issubclass(model, ApiModel)]
API = [model for model in MODELS if issubclass(model, ApiModel)]


def name(model: type[BaseModel]) -> str:
    return f"{model.__module__.removeprefix('fleetwright.')}.{model.__qualname__}"


def errors(model: type[BaseModel], payload: dict[str, object]) -> list[tuple[tuple[int | str, ...], str]]:
    try:
        model.model_validate(payload)
    except ValidationError as error:
        return [(tuple(e["loc"]), e["type"]) for e in error.errors()]
    return []


def test_the_handlers_reach_the_payloads_and_the_api_models_they_carry() -> None:
    names = {model.__name__ for model in MODELS}
    assert {
        "RolloutInput",
        "NodeInput",
        "DecideReport",
        "Progress",
        "RolloutState",
        "EngineSettings",
    } <= names
    assert {"NodeProfile", "DeploymentPolicy"} <= {model.__name__ for model in API}


@pytest.mark.parametrize("model", PAYLOADS, ids=name)
def test_a_payload_model_ignores_a_field_it_does_not_know(model: type[BaseModel]) -> None:
    # Required fields are missing from the payload, and named so; the unknown one is never named.
    assert not [found for found in errors(model, {UNKNOWN: 1}) if UNKNOWN in found[0]]
    if not errors(model, {}):
        assert model.model_validate({UNKNOWN: 1}) == model.model_validate({})


@pytest.mark.parametrize("model", API, ids=name)
def test_an_api_model_refuses_an_unknown_field_naming_it(model: type[BaseModel]) -> None:
    assert ((UNKNOWN,), "extra_forbidden") in errors(model, {UNKNOWN: 1})


def test_the_operators_engine_settings_refuse_an_unknown_knob_naming_it() -> None:
    with pytest.raises(ValidationError, match=r"engine\.observe_intervl_seconds"):
        WorkerSettings.model_validate({"engine": {"observe_intervl_seconds": 5}})
    assert (
        WorkerSettings.model_validate(
            {"engine": {"observe_interval_seconds": 5}}
        ).engine.observe_interval_seconds
        == 5
    )
