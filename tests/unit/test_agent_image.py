"""The agent image ships only what runs on a node: every module of agent/ is part of the runtime."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

AGENT = Path(__file__).resolve().parents[2] / "agent"


def test_every_agent_module_is_reached_from_the_entry_point() -> None:
    # A fresh interpreter: what the image's `python -m fleetwright.agent` imports, nothing else.
    probe = "import sys, fleetwright.agent.cli; print(' '.join(sorted(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    modules = {p.stem for p in AGENT.glob("*.py")} - {"__init__", "__main__"}
    unused = sorted(m for m in modules if f"fleetwright.agent.{m}" not in loaded)
    assert unused == [], f"agent/ holds modules the agent never imports: {unused}"


def test_the_image_copies_the_agent_modules_and_deletes_nothing() -> None:
    dockerfile = (AGENT / "Dockerfile").read_text(encoding="utf-8")
    assert "COPY fleetwright/agent/*.py /opt/fleetwright/fleetwright/agent/" in dockerfile
    assert not any("rm " in line and "/opt/fleetwright" in line for line in dockerfile.splitlines())
    assert {p.suffix for p in AGENT.iterdir() if p.name not in ("Dockerfile", "__pycache__")} == {".py"}
