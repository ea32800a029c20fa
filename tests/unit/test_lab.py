"""The product without the lab: ``fleetwright.lab`` names the development and build modules, the
import contract keeps the runtime off them (its lists match that name list and the layers), and the
image builders remove them from the installed package."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from fleetwright import lab
from fleetwright.images import dockerfile, prune, spec

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


def installed_package(prefix: Path) -> Path:
    """A fake ``pip install --target prefix``: every lab module as a package directory or a compiled
    ``.py`` file, beside runtime modules that share their names' prefixes."""
    package = prefix / "fleetwright"
    (package / "__pycache__").mkdir(parents=True)
    for dotted in lab.MODULES:
        name = dotted.removeprefix("fleetwright.")
        if name in {"chart", "certs"}:
            (package / f"{name}.py").write_text("")
            (package / "__pycache__" / f"{name}.cpython-311.pyc").write_bytes(b"")
        else:
            (package / name / "data").mkdir(parents=True)
            (package / name / "__init__.py").write_text("")
            (package / name / "data" / "x.json").write_text("{}")
    for kept in ("__init__.py", "lab.py", "chartish.py", "__pycache__/chartish.cpython-311.pyc"):
        (package / kept).write_text("")
    (package / "activities").mkdir()
    (package / "activities" / "images.py").write_text("")  # a runtime module named like a lab one
    return package


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_pruning_removes_the_lab_modules_and_nothing_else(tmp_path: Path) -> None:
    package = installed_package(tmp_path)
    removed = prune.prune_lab(tmp_path)
    assert {p.relative_to(package).parts[-1] for p in removed} == {
        "local",
        "chaos",
        "images",
        "packagetest",
        "chart.py",
        "chart.cpython-311.pyc",
        "certs.py",
        "certs.cpython-311.pyc",
    }
    assert files(package) == {
        "__init__.py",
        "lab.py",
        "chartish.py",
        "__pycache__",
        "__pycache__/chartish.cpython-311.pyc",
        "activities",
        "activities/images.py",
    }


def test_a_lab_module_missing_from_the_install_is_an_error(tmp_path: Path) -> None:
    package = installed_package(tmp_path)
    (package / "certs.py").unlink()
    (package / "__pycache__" / "certs.cpython-311.pyc").unlink()
    with pytest.raises(FileNotFoundError, match=r"fleetwright\.certs"):
        prune.prune_lab(tmp_path)


def test_the_dockerfile_prunes_the_lab_after_the_install() -> None:
    worker = dockerfile.render(spec.FLEETWRIGHT)
    install = worker.index("pip install --no-cache-dir")
    assert worker.index(f"python3 -m fleetwright.images.prune {spec.PREFIX}") > install
