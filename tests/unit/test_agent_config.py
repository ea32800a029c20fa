"""config.json validation, the command line and the pure pieces of the agent (no chroot)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from fleetwright.agent import cli, config, interrupts, logs, state
from fleetwright.agent.settings import ResourceId, Settings, SettingsError
from tests.support.payloads import step

pytestmark = pytest.mark.unit


def doc(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "schema_version": "v1",
        "package_name": "demo",
        "package_version": "1.2.3",
        "expected_config_files": [],
        "modes": {"apply": [step("a.sh")], "apply-check": [step("a_check.sh")]},
    }
    base.update(overrides)
    return base


def errors_of(raw: object, skyhook_dir: str | None = None) -> list[tuple[str, str]]:
    with pytest.raises(config.ConfigError) as info:
        config.validate(raw, skyhook_dir)
    return info.value.errors


def fields(raw: object, skyhook_dir: str | None = None) -> list[str]:
    return [path for path, _ in errors_of(raw, skyhook_dir)]


def test_valid_document_loads_with_defaults() -> None:
    cfg = config.validate(doc(extra_key="ignored", root_dir="/x"), None)
    assert cfg.package_name == "demo"
    assert cfg.steps("apply")[0].returncodes == (0,)
    assert cfg.steps("config") == ()
    assert cfg.warnings == ()


def test_every_structural_error_is_reported_at_once_with_its_field() -> None:
    bad_step = step("a.sh")
    bad_step["returncodes"] = "0"
    bad_step["idempotence"] = "yes"
    bad_step["bogus"] = 1
    raw = doc(package_version="v1.2", modes={"apply": [bad_step], "apply-check": [step("c.sh")]})
    del raw["expected_config_files"]
    assert fields(raw) == [
        "expected_config_files",
        "package_version",
        "modes.apply[0].bogus",
        "modes.apply[0].returncodes",
        "modes.apply[0].idempotence",
    ]


@pytest.mark.parametrize(
    ("mutate", "field", "fragment"),
    [
        (lambda d: d.update(schema_version="v2"), "schema_version", "unknown schema version"),
        (lambda d: d.update(package_version="01.2.3"), "package_version", "SemVer"),
        (lambda d: d["modes"].update(install=[]), "modes.install", "not a known mode"),
        (
            lambda d: d["modes"]["apply"][0].update(returncodes=[]),
            "modes.apply[0].returncodes",
            "at least one",
        ),
        (
            lambda d: d["modes"]["apply"][0].update(returncodes=[True]),
            "modes.apply[0].returncodes[0]",
            "integer",
        ),
        (lambda d: d["modes"]["apply"][0].update(arguments=[1]), "modes.apply[0].arguments[0]", "string"),
        (lambda d: d["modes"]["apply"][0].update(env={"A": 1}), "modes.apply[0].env.A", "string"),
        (lambda d: d["modes"]["apply"][0].update(name="has space"), "modes.apply[0].name", "letters"),
        (lambda d: d["modes"]["apply"][0].update(path="/bin/sh"), "modes.apply[0].path", "relative"),
        (lambda d: d["modes"]["apply"][0].update(path="../x.sh"), "modes.apply[0].path", "relative"),
        (lambda d: d["modes"]["apply"][0].pop("on_host"), "modes.apply[0].on_host", "required"),
        (
            lambda d: d["modes"]["apply"][0].update(upgrade_step=True),
            "modes.apply[0].upgrade_step",
            "upgrade",
        ),
        (lambda d: d["modes"].update({"apply-check": []}), "modes.apply-check", "because apply has steps"),
    ],
)
def test_field_named_errors(mutate: Any, field: str, fragment: str) -> None:
    raw = doc()
    mutate(raw)
    found = errors_of(raw)
    assert any(path == field and fragment in msg for path, msg in found), found


def test_upgrade_step_with_arguments_is_rejected() -> None:
    upgrade = step("u.sh", "x", upgrade_step=True)
    raw = doc(modes={"upgrade": [upgrade], "upgrade-check": [step("u_check.sh")]})
    assert "modes.upgrade[0].arguments" in fields(raw)


def test_only_check_modes_and_no_steps_are_rejected() -> None:
    assert fields(doc(modes={"apply-check": [step("c.sh")]})) == ["modes"]
    assert [m for _, m in errors_of(doc(modes={"apply": []}))] == [
        "no defined steps: at least one mode must have a step"
    ]


def test_check_mode_beside_an_empty_work_mode_is_fine() -> None:
    # tuning ships post-interrupt-check without post-interrupt
    cfg = config.validate(doc(modes={"config": [], "post-interrupt-check": [step("p.sh")]}), None)
    assert len(cfg.steps("post-interrupt-check")) == 1


def test_missing_step_paths_are_all_reported(tmp_path: Path) -> None:
    (tmp_path / "a.sh").write_text("#!/bin/sh\n")
    raw = doc(modes={"apply": [step("a.sh"), step("gone.sh")], "apply-check": [step("nope/c.sh")]})
    assert fields(raw, str(tmp_path)) == ["modes.apply[1].path", "modes.apply-check[0].path"]


def test_naming_convention_is_a_warning_not_an_error() -> None:
    cfg = config.validate(doc(modes={"apply": [step("dir/x.sh")], "apply-check": [step("other.sh")]}), None)
    assert cfg.warnings == ("modes.apply: no check step dir/x_check.sh listed for dir/x.sh",)


def test_load_reports_unreadable_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(config.ConfigError) as info:
        config.load(str(tmp_path))
    assert info.value.errors[0][0] == "config.json"
    assert "not valid JSON" in info.value.errors[0][1]


def test_flag_marker_matches_nodewright() -> None:
    # The example of docs/package-format.md §11: arguments ['apply'], return codes [0].
    assert state.flag_marker(["apply"], [0]) == "WydhcHBseSddX1swXQ=="
    assert state.flag_marker([], [0, 1]) == base64.b64encode(b"[]_[0, 1]").decode()


def test_history_corruption_is_backed_up(tmp_path: Path) -> None:
    path = tmp_path / "history" / "demo.json"
    path.parent.mkdir()
    path.write_text("garbage")
    assert state.current_version(str(path)) == state.UNKNOWN_VERSION
    assert (tmp_path / "history" / "demo.json.backup").read_text() == "garbage"
    state.record_version(str(path), "1.0.0")
    state.record_version(str(path), "2.0.0")
    saved = json.loads(path.read_text())
    assert saved["current-version"] == "2.0.0"
    assert [h["version"] for h in saved["history"]] == ["2.0.0", "1.0.0"]


def test_log_retention_prunes_err_with_log(tmp_path: Path) -> None:
    base = str(tmp_path / "apply.sh")
    for i in range(8):
        for suffix in (".log", ".log.err"):
            name = f"{base}-2026-01-01-00000{i}{suffix}"
            Path(name).write_text(str(i))
            os.utime(name, (1000 + i, 1000 + i))
    removed = logs.prune(base)
    assert len(removed) == 6
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(
        f"apply.sh-2026-01-01-00000{i}{s}" for i in range(3, 8) for s in (".log", ".log.err")
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["apply", "/root", "/var/lib/skyhook/x"], ("apply", "/root", "/var/lib/skyhook/x", None)),
        (["apply", "/var/lib/skyhook/x"], ("apply", "/root", "/var/lib/skyhook/x", None)),
        (["interrupt", "/var/lib/x", "e30="], ("interrupt", "/root", "/var/lib/x", "e30=")),
        (["interrupt", "/host", "/var/lib/x", "e30="], ("interrupt", "/host", "/var/lib/x", "e30=")),
    ],
)
def test_command_line_forms(argv: list[str], expected: tuple[str, str, str, str | None]) -> None:
    inv = cli.parse(argv)
    assert (inv.mode, inv.root, inv.copy_dir, inv.interrupt_data) == expected


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["apply"],
        ["apply", "root", "/x"],
        ["apply", "/root", "/x", "data"],
        ["interrupt", "/x"],
        ["a", "b", "c", "d", "e"],
    ],
)
def test_malformed_invocation_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_unknown_mode_is_a_successful_noop(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["reticulate", "/root", "/nowhere"]) == 0
    assert "unknown mode 'reticulate'" in capsys.readouterr().out


def test_resource_id_needs_three_fields() -> None:
    assert ResourceId.parse("prof-uid-3_tuning_1.0.0").package == "tuning"
    with pytest.raises(SettingsError, match="three fields"):
        Settings.from_env({"SKYHOOK_RESOURCE_ID": "prof_tuning"})
    settings = Settings.from_env({"COPY_RESOLV": "TRUE", "OVERLAY_ALWAYS_RUN_STEP": "yes"})
    assert settings.copy_resolv_requested
    assert not settings.always_run_step
    assert settings.state_root == "/etc/skyhook"


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"type": "reboot"}, "interrupt.type"),
        ({"type": "node_restart", "services": []}, "interrupt.services: not allowed"),
        ({"type": "service_restart"}, "interrupt.services: must be a non-empty array"),
    ],
)
def test_interrupt_decoding_names_the_field(payload: dict[str, object], fragment: str) -> None:
    with pytest.raises(interrupts.InterruptError, match=fragment):
        interrupts.decode(base64.b64encode(json.dumps(payload).encode()).decode())


def test_interrupt_round_trip() -> None:
    original = interrupts.InterruptRequest("service_restart", ("containerd.service",))
    decoded = interrupts.decode(interrupts.encode(original))
    assert decoded == original
    assert decoded.commands() == [
        ["systemctl", "daemon-reload"],
        ["systemctl", "restart", "containerd.service"],
    ]
    with pytest.raises(interrupts.InterruptError, match="base64"):
        interrupts.decode("%%%")
