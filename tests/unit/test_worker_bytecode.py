"""The worker keeps compiled bytecode in a private cache even under ``PYTHONDONTWRITEBYTECODE``:
the workflow sandbox re-imports workflow modules for every workflow run, and without bytecode each
run compiled them from source. Nothing is written next to the sources."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SCRIPT = """
import importlib, sys
from fleetwright.worker.main import cache_bytecode
cache_bytecode()
sys.path.insert(0, sys.argv[1])
importlib.import_module("sample_workflow")
print(sys.pycache_prefix)
"""


def test_bytecode_is_cached_privately_when_the_environment_forbids_writing_it(tmp_path: Path) -> None:
    sources, temp = tmp_path / "src", tmp_path / "tmp"
    sources.mkdir()
    temp.mkdir()
    (sources / "sample_workflow.py").write_text("VALUE = 1\n")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(temp)}
    env.pop("PYTHONPYCACHEPREFIX", None)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(sources)], env=env, capture_output=True, text=True, check=True
    )
    prefix = Path(out.stdout.strip())
    assert prefix.parent == temp
    assert list(prefix.rglob("sample_workflow.*.pyc")), "no bytecode was cached"
    assert not (sources / "__pycache__").exists(), "bytecode written next to the sources"
