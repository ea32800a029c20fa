"""The generated CRDs: committed files match a fresh generation, schemas are structural and
documented, and the CEL rules come with the bounds the apiserver's cost estimator needs."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwright.api import crdgen
from tests.support.releases import SUPPORTED, previous

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def test_committed_crds_match_a_fresh_generation(tmp_path: Path) -> None:
    assert crdgen.main(["--out", str(tmp_path)]) == 0
    for spec in crdgen.CRDS:
        fresh = (tmp_path / spec.filename).read_text()
        committed = (REPO / "crds" / spec.filename).read_text()
        assert fresh == committed, f"crds/{spec.filename} is stale: run python -m fleetwright.api.crdgen"
    assert crdgen.main(["--out", str(REPO / "crds"), "--check"]) == 0


def test_check_reports_drift_with_a_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crdgen.main(["--out", str(tmp_path)])
    target = tmp_path / crdgen.NODEPROFILE.filename
    target.write_text(target.read_text().replace("shortNames:\n    - np", "shortNames:\n    - nope"))
    assert crdgen.main(["--out", str(tmp_path), "--check"]) == 1
    assert "+    - np" in capsys.readouterr().out


def schemas(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(node, dict):
        return
    yield path, node
    for name, sub in (node.get("properties") or {}).items():
        yield from schemas(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from schemas(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from schemas(node["additionalProperties"], f"{path}{{}}")


@pytest.fixture(params=[s.kind for s in crdgen.CRDS])
def crd(request: pytest.FixtureRequest) -> dict[str, Any]:
    spec = next(s for s in crdgen.CRDS if s.kind == request.param)
    loaded: dict[str, Any] = yaml.safe_load(crdgen.render(crdgen.build_crd(spec)))
    return loaded


def root(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_crd_identity(crd: dict[str, Any]) -> None:
    spec = crd["spec"]
    assert spec["group"] == "fleetwright.io"
    assert spec["scope"] == "Cluster"
    assert spec["names"]["categories"] == ["fleetwright"]
    assert spec["names"]["shortNames"] in (["np"], ["dp"], ["fwc"])
    version = spec["versions"][0]
    assert version["name"] == "v1alpha1"
    assert version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns[-1] == "Age"


def test_printer_columns_of_nodeprofile() -> None:
    columns = {c["name"]: c["jsonPath"] for c in crdgen.NODEPROFILE.printer_columns}
    assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    assert set(columns) == {"Ready", "Phase", "Complete", "In-Progress", "Policy", "Age"}


def test_schema_is_structural(crd: dict[str, Any]) -> None:
    text = yaml.safe_dump(crd)
    for forbidden in (
        "$ref",
        "$defs",
        "title:",
        "patternProperties",
        "propertyNames",
        "const:",
        "type: 'null'",
    ):
        assert forbidden not in text
    for path, node in schemas(root(crd)):
        if node.get("x-kubernetes-int-or-string"):
            assert "type" not in node
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}]
            continue
        assert "type" in node, f"{path} has no type"
        assert "anyOf" not in node, path


def test_every_field_is_documented(crd: dict[str, Any]) -> None:
    undocumented = [
        path
        for path, node in schemas(root(crd))
        if path not in ("", ".metadata") and not path.endswith(("[]", "{}")) and not node.get("description")
    ]
    assert not undocumented


def test_cel_rules_are_bounded(crd: dict[str, Any]) -> None:
    """Every array has maxItems and every map maxProperties, so CEL costs can be estimated."""
    for path, node in schemas(root(crd)):
        if path in ("", ".metadata", ".apiVersion", ".kind"):
            continue
        if node.get("type") == "array":
            assert "maxItems" in node, path
        if node.get("type") == "object" and isinstance(node.get("additionalProperties"), dict):
            assert "maxProperties" in node, path
        if node.get("type") == "string" and "enum" not in node and not path.startswith(".status"):
            assert "maxLength" in node, path


def test_local_rules_become_cel(crd: dict[str, Any]) -> None:
    rules = [
        rule["rule"] for _, node in schemas(root(crd)) for rule in node.get("x-kubernetes-validations", [])
    ]
    assert rules
    assert any("allNodes" in r for r in rules) or any("maxUnavailable" in r for r in rules)


def test_list_map_keys_make_names_unique() -> None:
    np = root(crdgen.build_crd(crdgen.NODEPROFILE))
    packages = np["properties"]["spec"]["properties"]["packages"]
    assert packages["x-kubernetes-list-type"] == "map"
    assert packages["x-kubernetes-list-map-keys"] == ["name"]
    assert np["required"] == ["spec"]


def _defaults(schema: Any, path: str = "") -> Iterator[str]:
    """The paths of a CRD schema's properties that carry a ``default``."""
    if not isinstance(schema, dict):
        return
    if "default" in schema:
        yield path
    for name, sub in (schema.get("properties") or {}).items():
        yield from _defaults(sub, f"{path}.{name}")
    yield from _defaults(schema.get("items"), f"{path}[]")


def released_crds() -> list[str]:
    """The CRD files the previous release shipped (a CRD new in this release has no older reader
    for its defaults to break)."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-tree", "--name-only", SUPPORTED[previous()], "crds/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted(Path(p).name for p in listed if p.endswith(".yaml"))


@pytest.mark.parametrize("name", released_crds())
def test_no_field_added_since_the_previous_release_has_a_default(name: str) -> None:
    """The API server writes a CRD's defaults into every object it stores, before admission: a
    default on a field the previous release does not know makes its webhook and models refuse
    every object (an upgrade or a downgrade running both). A new field's absence means its
    default instead."""
    release = previous()
    old_text = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{SUPPORTED[release]}:crds/{name}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    def schema(text: str) -> Any:
        return yaml.safe_load(text)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

    old_paths = set(_paths(schema(old_text)))
    added = [p for p in _defaults(schema((REPO / "crds" / name).read_text())) if p not in old_paths]
    # A default below a new field is written only into objects that use that field (which the
    # previous release refuses anyway); one whose parent the previous release knows is written
    # into every object.
    assert [p for p in added if _parent(p) in old_paths] == [], release


def _paths(schema: Any, path: str = "") -> Iterator[str]:
    """Every property path of a CRD schema."""
    if not isinstance(schema, dict):
        return
    yield path
    for name, sub in (schema.get("properties") or {}).items():
        yield from _paths(sub, f"{path}.{name}")
    yield from _paths(schema.get("items"), f"{path}[]")


def _parent(path: str) -> str:
    return path[:-2] if path.endswith("[]") else path.rsplit(".", 1)[0]
