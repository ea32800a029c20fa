"""Catalog package ``shellscript``: every stage runs its configMap script in a chroot (needs root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleetwright.cli.package import lint
from fleetwright.packagetest.hostroot import HostRoot
from fleetwright.packagetest.runner import run_stages

pytestmark = pytest.mark.unit

PACKAGE = str(Path(__file__).resolve().parents[2] / "packages" / "shellscript")
WORDS = {"apply": "apply", "config": "config", "post-interrupt": "post_interrupt", "uninstall": "uninstall"}


def scripts_for(word: str) -> dict[str, str]:
    return {
        f"{word}.sh": f'#!/bin/bash\necho "$1 on $SKYHOOK_RESOURCE_ID" > /etc/{word}.done\n',
        f"{word}_check.sh": f'#!/bin/bash\ngrep -q "^{word} on " /etc/{word}.done\n',
    }


def test_lints_clean() -> None:
    report = lint(PACKAGE)
    assert report.errors == []
    assert report.warnings == []


@pytest.mark.parametrize("stage", list(WORDS))
def test_each_stage_runs_its_script_and_check(host: HostRoot, stage: str) -> None:
    word = WORDS[stage]
    runs = run_stages(host, PACKAGE, [stage], configmaps=scripts_for(word))
    assert [r.result.returncode for r in runs] == [0, 0], runs[-1].result.output
    assert host.read(f"/etc/{word}.done") == f"{word} on test-0000-1_shellscript_1.0.0\n"
    # Wrong host state: the check fails.
    os.remove(host.host(f"/etc/{word}.done"))
    check = run_stages(host, PACKAGE, [f"{stage}-check"], configmaps=scripts_for(word))
    assert check[-1].result.returncode == 1


@pytest.mark.parametrize("missing", ["apply.sh", "apply_check.sh"])
def test_missing_stage_script_is_a_clear_failure(host: HostRoot, missing: str) -> None:
    maps = scripts_for("apply")
    del maps[missing]
    runs = run_stages(host, PACKAGE, ["apply"], configmaps=maps)
    assert runs[-1].result.returncode == 1
    assert f"configMap key '{missing}' is missing" in runs[-1].result.output


def test_script_exit_status_is_the_step_result(host: HostRoot) -> None:
    maps = {"config.sh": "#!/bin/bash\necho partial\nexit 7\n", "config_check.sh": "exit 0\n"}
    runs = run_stages(host, PACKAGE, ["config"], configmaps=maps)
    assert [r.mode for r in runs] == ["config"]
    assert "exit code 7 is not an allowed return code" in runs[0].result.output
