"""Run by a release's own code (``PYTHONPATH`` at its checkout): prints, as JSON, the API objects
and node records that release writes, for the current code to read back
(``tests/unit/test_release_objects.py``). Uses only what every supported release has; imports
nothing of this checkout's tests."""

from __future__ import annotations

import importlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from fleetwright.api import keys
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.nodeprofile import NodeProfile

KINDS: dict[str, type[NodeProfile] | type[DeploymentPolicy]] = {
    "NodeProfile": NodeProfile,
    "DeploymentPolicy": DeploymentPolicy,
}


def objects(tree: Path) -> list[dict[str, Any]]:
    """Every valid object of the release's admission corpus and examples, as it stores them."""
    files = sorted((tree / "tests" / "integration" / "corpus" / "valid").glob("*.yaml"))
    files += sorted((tree / "examples").glob("*.yaml"))
    written = []
    for path in files:
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("kind") in KINDS:
                model = KINDS[document["kind"]].model_validate(document)
                written.append(model.model_dump(mode="json", by_alias=True, exclude_none=True))
    return written


def _planner(path: str, before: str) -> ModuleType:
    """The planner module at ``path``, or at ``before`` in a release whose planner was still flat
    (0.2.0 and older: ``planner.nodestate``, ``planner.stages``)."""
    try:
        return importlib.import_module(f"fleetwright.planner.{path}")
    except ModuleNotFoundError:
        return importlib.import_module(f"fleetwright.planner.{before}")


def records() -> dict[str, str]:
    """Node annotations a node carries mid-rollout: a package with a pending change and what it
    was before, another complete."""
    state_module, stages = _planner("node.state", "nodestate"), _planner("node.stages", "stages")
    NodePackageState, PackageRecord = state_module.NodePackageState, state_module.PackageRecord
    PendingChange, Before, Stage = state_module.PendingChange, state_module.Before, stages.Stage
    since = datetime(2026, 12, 1, 8, 30, tzinfo=UTC)
    state = NodePackageState(
        profile="gpu-tuning",
        packages={
            "tuning": PackageRecord(
                version="1.0.0",
                config={"sysctl.conf": "abc123"},
                pending=PendingChange(
                    version="1.1.0",
                    config={"sysctl.conf": "def456"},
                    stages=(Stage("upgrade"), Stage("config"), Stage("interrupt"), Stage("post-interrupt")),
                    done=(Stage("upgrade"),),
                ),
                before=Before(target="t-1", since=since, version="1.0.0", config={"sysctl.conf": "abc123"}),
            ),
            "chrony": PackageRecord(version="4.5.0"),
        },
    )
    key, value = state_module.format_annotation(state)
    return {key: value}


def names() -> dict[str, str]:
    """The keys and labels the release writes on nodes, Jobs and profiles for one profile."""
    profile = "gpu-tuning"
    found = {
        "state": keys.state_key(profile),
        "cordon": keys.cordon_key(profile),
        "claim": keys.claim_key(profile),
        "status-label": keys.status_label_key(profile),
        "condition": keys.condition_type(profile),
    }
    for name in dir(keys):
        value = getattr(keys, name)
        if name.isupper() and isinstance(value, str):
            found[name] = value
    return found


def main() -> None:
    tree = Path(sys.argv[1])
    print(json.dumps({"objects": objects(tree), "records": records(), "names": names()}))


if __name__ == "__main__":
    main()
