"""The settings reference is generated from the settings model: docs/settings.md's table does not drift
from it, every setting has a description, and ``fleetwright worker --help`` prints it."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fleetwright.cli import serve  # noqa: F401 - registers the process commands on the app
from fleetwright.cli.app import app
from fleetwright.process import settingsdoc
from fleetwright.process.settings import WorkerSettings
from fleetwright.workflows.enginesettings import EngineSettings

pytestmark = pytest.mark.unit


def test_the_reference_table_does_not_drift() -> None:
    assert settingsdoc.drift() == "", "run python -m fleetwright.process.settingsdoc"


def test_every_setting_is_described() -> None:
    keys = {s.key: s for s in settingsdoc.settings()}
    expected = {k for k in WorkerSettings.model_fields if k != "engine"}
    expected |= {f"engine.{k}" for k in EngineSettings.model_fields}
    assert set(keys) == expected
    assert [k for k, s in keys.items() if not s.description] == []


@pytest.mark.parametrize("command", ["worker", "controller", "webhook"])
def test_the_process_commands_print_the_reference(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "FLEETWRIGHT_SETTINGS names a JSON file" in result.output
    for setting in settingsdoc.settings():
        assert f"{setting.key} = {setting.default}" in result.output


def test_the_reference_says_the_settings_variable_is_a_path() -> None:
    page = settingsdoc.REFERENCE.read_text()
    assert "`FLEETWRIGHT_SETTINGS` (JSON)" not in page
    assert "`FLEETWRIGHT_SETTINGS` is the **path** of a JSON file" in page
