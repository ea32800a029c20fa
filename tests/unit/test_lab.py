"""The product without the lab: ``fleetwright.lab`` names the development and build modules, and the
import contract keeps the runtime off them (its lists match that name list and the layers)."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from fleetwright import lab

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def contract(name: str, key: str) -> set[str]:
    """The modules a key of one ``.importlinter`` contract lists (a layer's ``a | b`` split)."""
    config = configparser.ConfigParser()
    config.read(REPO / ".importlinter")
    lines = config[f"importlinter:contract:{name}"][key].split("\n")
    return {part.strip() for line in lines for part in line.split("|") if part.strip()}


def test_the_checkout_has_the_lab() -> None:
    assert lab.installed()


def test_the_contract_forbids_the_lab_to_every_runtime_module() -> None:
    every = {f"fleetwright.{name}" for name in contract("layers", "layers")}
    assert contract("runtime-without-lab", "forbidden_modules") == set(lab.MODULES)
    assert contract("runtime-without-lab", "source_modules") == every - set(lab.MODULES) - {"fleetwright.cli"}
