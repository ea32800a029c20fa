"""The keys module: every per-profile key fleetwright writes on a Node is one the API server
accepts, for every profile name the CRD allows (a DNS label of at most 63 characters), and two
profiles never share one; and no other module spells out a key of its own."""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fleetwright.api import keys
from fleetwright.api.campaign import Campaign
from fleetwright.api.common import API_VERSION
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.keys import claim_key, condition_type, cordon_key, state_key, status_label_key
from fleetwright.api.nodeprofile import NodeProfile

pytestmark = pytest.mark.unit

# A qualified name as Kubernetes validates label and annotation keys (and node condition types
# follow): an optional DNS-subdomain prefix of at most 253 characters, then a name part of at most
# 63 characters, alphanumeric at both ends.
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

PER_PROFILE: dict[str, Callable[[str], str]] = {
    "state": state_key,
    "cordon": cordon_key,
    "claim": claim_key,
    "status label": status_label_key,
    "condition type": condition_type,
}


def valid(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return len(prefix) <= 253 and bool(_PREFIX.match(prefix)) and len(name) <= 63 and bool(_NAME.match(name))


def profile_name(length: int, tail: str = "a") -> str:
    return ("p" + "-x" * 40)[: length - 1] + tail


@pytest.mark.parametrize("length", [1, 2, 40, 52, 55, 56, 57, 58, 61, 62, 63])
@pytest.mark.parametrize("kind", sorted(PER_PROFILE))
def test_each_key_is_valid_for_every_profile_name_length(kind: str, length: int) -> None:
    key = PER_PROFILE[kind](profile_name(length))
    assert valid(key), f"{kind} key {key!r} ({len(key.rpartition('/')[2])}-character name part)"


@pytest.mark.parametrize("kind", sorted(PER_PROFILE))
def test_long_profile_names_that_differ_only_at_the_end_keep_distinct_keys(kind: str) -> None:
    keys = {PER_PROFILE[kind](profile_name(63, tail)) for tail in "abc"}
    assert len(keys) == 3


def test_status_keys_fit_63_characters_and_stay_distinct() -> None:
    short = "gpu-tuning"
    assert status_label_key(short) == "fleetwright.io/status.gpu-tuning"
    assert condition_type(short) == "fleetwright.io/gpu-tuning"
    long_a, long_b = "a" * 80 + "-one", "a" * 80 + "-two"
    for key in (status_label_key(long_a), condition_type(long_a)):
        name = key.split("/", 1)[1]
        assert len(name) <= 63
        assert name[-1].isalnum()
    assert status_label_key(long_a) != status_label_key(long_b)
    assert status_label_key(long_a) == status_label_key(long_a)
    # The same rule as the state annotation, so the three keys of one profile read alike.
    assert state_key(long_a).startswith("fleetwright.io/state.aaa")


REPO = Path(__file__).resolve().parents[2]
SOURCES = ("fleetwright", "activities", "workflows", "worker", "agent", "bench")
# Other owners' domains under ours: the local cluster's simulation, chaos runs, benchmarks.
FOREIGN = re.compile(r"\b(sim|chaos|bench|test)\.fleetwright\.io")


def _strings(path: Path) -> Iterator[tuple[int, str]]:
    """The string constants of a module but its docstrings (prose may name a key)."""
    tree = ast.parse(path.read_text())
    prose = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            yield node.lineno, node.value


def test_no_module_but_keys_spells_out_the_prefix() -> None:
    # The resources' apiVersion is a Literal type, which must be spelled out; it is tied below.
    api_version = {
        REPO / "fleetwright/api/nodeprofile.py",
        REPO / "fleetwright/api/deploymentpolicy.py",
        REPO / "fleetwright/api/campaign.py",
    }
    paths = itertools.chain.from_iterable((REPO / s).rglob("*.py") for s in SOURCES)
    found = [
        f"{path.relative_to(REPO)}:{line}: {text!r}"
        for path in sorted(paths)
        if path != REPO / "fleetwright/api/keys.py"
        for line, text in _strings(path)
        if keys.GROUP in FOREIGN.sub("", text) and not (path in api_version and text.startswith(API_VERSION))
    ]
    assert found == []


def test_the_resources_api_version_is_the_groups() -> None:
    assert API_VERSION.startswith(keys.PREFIX)
    assert NodeProfile.model_fields["api_version"].default == API_VERSION
    assert DeploymentPolicy.model_fields["api_version"].default == API_VERSION
    assert Campaign.model_fields["api_version"].default == API_VERSION
