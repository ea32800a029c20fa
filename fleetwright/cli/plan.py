"""``fleetwright plan``: preview what a rollout of a NodeProfile under a DeploymentPolicy would do
on a fleet: batches (with the workloads each interrupts and the GPU-hours they are expected to
lose), each node's stages, drains and reboots, blocked nodes and why, and an ETA.

Owns reading the files and the options; the plan itself comes from ``fleetwright.planner.rollout.preview``
(the same engine the rollout workflow runs), its tables from ``fleetwright.cli.planview``. ``-o
json`` prints the ``Plan`` model, which parses back with ``Plan.model_validate_json`` (``-o yaml``
the same data as YAML).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetwright.cli.app import app
from fleetwright.cli.session import OutputOpt
from fleetwright.errors import FleetwrightError, InvalidSpecError

if TYPE_CHECKING:
    from rich.console import Console

    from fleetwright.api.deploymentpolicy import DeploymentPolicy
    from fleetwright.api.nodeprofile import NodeProfile
    from fleetwright.planner.rollout.observations import Observations
    from fleetwright.planner.rollout.preview import Plan


FilesArg = Annotated[
    list[Path],
    typer.Argument(
        help="YAML/JSON files holding the NodeProfile and, optionally, "
        "its DeploymentPolicy (default: the built-in policy)."
    ),
]
FleetOpt = Annotated[
    Path | None, typer.Option("--fleet", help="Fleet snapshot: `kubectl get nodes -o json`.")
]
PodsOpt = Annotated[
    Path | None,
    typer.Option(
        "--pods",
        help="With --fleet: the pods, `kubectl get pods -A -o json`, for the workloads on each node "
        "(with --kubeconfig they are read live).",
    ),
]
KubeconfigOpt = Annotated[
    Path | None,
    typer.Option("--kubeconfig", help="Read the fleet from the live cluster behind this kubeconfig."),
]
NowOpt = Annotated[str | None, typer.Option("--now", help="Plan as of this ISO 8601 time (default: now).")]
MaxNodesOpt = Annotated[int, typer.Option("--max-nodes", help="Node rows in the table output.")]
RollbackOpt = Annotated[
    bool,
    typer.Option(
        "--rollback",
        help="Preview the reverse plan instead: what `failure.action: rollback` would run had the "
        "rollout changed every node it needs to.",
    ),
]
PreviousOpt = Annotated[
    Path | None,
    typer.Option(
        "--previous",
        help="With --rollback: the NodeProfile the rollout replaces (what the rollback returns to; "
        "default with --kubeconfig: the one in the cluster).",
    ),
]
ResolveOpt = Annotated[
    bool,
    typer.Option(
        "--resolve-images",
        help="Ask each package image's registry for the digest its tag names now (what a "
        "rollout generation starting now would pin); one that cannot be asked shows unresolved.",
    ),
]
RegistryCaOpt = Annotated[
    Path | None,
    typer.Option("--registry-ca-file", help="With --resolve-images: PEM CA bundle of the registries."),
]


class PlanInputError(Exception):
    """A file could not be read or does not hold what the plan needs."""


def _documents(path: Path) -> list[dict[str, Any]]:
    import yaml

    try:
        text = path.read_text()
    except OSError as err:
        raise PlanInputError(f"{path}: {err.strerror}") from err
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise PlanInputError(f"{path}: not valid YAML or JSON: {err}") from err
    out: list[dict[str, Any]] = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            out.extend(d for d in doc["items"] if isinstance(d, dict))
        elif isinstance(doc, dict):
            out.append(doc)
    return out


def _one(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d.get("kind") == kind]


def load_inputs(files: list[Path]) -> tuple[NodeProfile, DeploymentPolicy]:
    """The one NodeProfile among ``files`` and its DeploymentPolicy (the referenced one, the only
    one given, or the built-in default when none is given)."""
    from pydantic import ValidationError

    from fleetwright.api.deploymentpolicy import DeploymentPolicy
    from fleetwright.api.nodeprofile import NodeProfile

    docs = [d for f in files for d in _documents(f)]
    profiles = _one(docs, "NodeProfile")
    if len(profiles) != 1:
        raise PlanInputError(f"need exactly one NodeProfile among the files, found {len(profiles)}")
    policies = _one(docs, "DeploymentPolicy")
    try:
        profile = NodeProfile.from_k8s(profiles[0])
        parsed = [DeploymentPolicy.from_k8s(p) for p in policies]
    except ValidationError as err:
        raise PlanInputError(f"invalid manifest:\n{err}") from err
    return profile, _choose_policy(profile, parsed)


def _choose_policy(profile: NodeProfile, policies: list[DeploymentPolicy]) -> DeploymentPolicy:
    from fleetwright.api.deploymentpolicy import BUILTIN_POLICY

    ref = profile.spec.deployment_policy_ref
    if ref is None:
        if len(policies) > 1:
            raise PlanInputError(
                "the NodeProfile names no deploymentPolicyRef but several policies were given"
            )
        return policies[0] if policies else BUILTIN_POLICY
    named = [p for p in policies if p.metadata.name == ref.name]
    if named:
        return named[0]
    if len(policies) == 1:
        return policies[0]  # an explicitly given policy previews a what-if under another policy
    raise PlanInputError(f"DeploymentPolicy {ref.name!r} (the profile's deploymentPolicyRef) was not given")


def load_fleet(path: Path, profile: NodeProfile) -> Observations:
    import yaml

    try:
        raw = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    except (OSError, ValueError, yaml.YAMLError) as err:
        raise PlanInputError(f"{path}: cannot read the fleet snapshot: {err}") from err
    if not isinstance(raw, dict):
        raise PlanInputError(f"{path}: not a NodeList")
    return observe(raw, profile, str(path))


def load_live_fleet(kubeconfig: Path, profile: NodeProfile) -> tuple[Observations, list[dict[str, Any]]]:
    """The fleet as the cluster behind ``kubeconfig`` has it now, and the pods running on it."""
    from fleetwright.kube.client import from_kubeconfig
    from fleetwright.kube.nodes import list_nodes
    from fleetwright.kube.workloads import running_pods

    try:
        api = from_kubeconfig(kubeconfig)
        items = list_nodes(api)
        pods = running_pods(api)
    except (FleetwrightError, OSError, ValueError) as err:
        raise PlanInputError(f"{kubeconfig}: cannot read the nodes and pods: {err}") from err
    return observe({"kind": "NodeList", "items": items}, profile, str(kubeconfig)), pods


def load_pods(path: Path) -> list[dict[str, Any]]:
    """The pods of a ``kubectl get pods -A -o json`` snapshot."""
    import yaml

    try:
        raw = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    except (OSError, ValueError, yaml.YAMLError) as err:
        raise PlanInputError(f"{path}: cannot read the pod snapshot: {err}") from err
    items = raw.get("items") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        raise PlanInputError(f"{path}: not a PodList (`kubectl get pods -A -o json`)")
    return [p for p in items if isinstance(p, dict)]


def with_pods(observed: Observations, pods: list[dict[str, Any]], policy: DeploymentPolicy) -> Observations:
    """The observations with the workloads on each node and the pods ``workloadWait`` waits for,
    when the policy reads pods as the rollout does (``RolloutPolicy.reads_pods``)."""
    from fleetwright.kube.workloads import policy_pods
    from fleetwright.planner import convert

    rollout_policy = convert.policy(policy)
    if not rollout_policy.reads_pods():
        return observed
    workloads, finishing = policy_pods(pods, rollout_policy)
    workloads, finishing = workloads or {}, finishing or {}
    nodes = tuple(
        o.model_copy(update={"workloads": workloads.get(o.name, ()), "finishing": finishing.get(o.name, ())})
        for o in observed.nodes
    )
    return observed.model_copy(update={"nodes": nodes})


def observe(raw: dict[str, object], profile: NodeProfile, source: str) -> Observations:
    """The planner's observations of a NodeList for ``profile``; ``source`` names it in errors."""
    from fleetwright.planner import convert
    from fleetwright.planner.rollout.observations import Observations
    from fleetwright.planner.rollout.snapshot import node_items, observe_fleet

    try:
        nodes = observe_fleet(
            node_items(raw), profile.metadata.name, lambda labels: convert.targets(profile, labels)
        )
    except (ValueError, InvalidSpecError) as err:
        raise PlanInputError(f"{source}: {err}") from err
    return Observations(nodes=nodes)


def _replaced(previous: Path | None, kubeconfig: Path | None, profile: NodeProfile) -> NodeProfile:
    """The NodeProfile a rollout of ``profile`` replaces: the ``--previous`` file, else the one of
    that name in the live cluster."""
    from pydantic import ValidationError

    from fleetwright.api.nodeprofile import PLURAL as PROFILE_PLURAL
    from fleetwright.api.nodeprofile import NodeProfile
    from fleetwright.kube.client import from_kubeconfig
    from fleetwright.kube.resources import get_object

    if previous is not None:
        docs = _one(_documents(previous), "NodeProfile")
        if len(docs) != 1:
            raise PlanInputError(f"{previous}: need exactly one NodeProfile, found {len(docs)}")
        try:
            return NodeProfile.from_k8s(docs[0])
        except ValidationError as err:
            raise PlanInputError(f"{previous}: invalid NodeProfile:\n{err}") from err
    if kubeconfig is None:
        raise PlanInputError("--rollback needs --previous FILE (the NodeProfile the rollout replaces)")
    try:
        return NodeProfile.from_k8s(
            get_object(from_kubeconfig(kubeconfig), PROFILE_PLURAL, profile.metadata.name)
        )
    except (FleetwrightError, OSError, ValueError) as err:
        raise PlanInputError(f"{kubeconfig}: cannot read NodeProfile {profile.metadata.name}: {err}") from err


def _clock(value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC)  # the CLI may read the clock; the planner never does
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as err:
        raise PlanInputError(f"--now: not an ISO 8601 time: {value!r}") from err
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def resolve_images(profile: NodeProfile, ca_file: Path | None) -> dict[str, str]:
    """Each package image of ``profile`` resolved now, as a generation starting now would pin it;
    what cannot be resolved says why."""
    from fleetwright.registry import Registry, RegistryAccess

    registry = Registry(RegistryAccess(ca_file=str(ca_file or "")))
    images = {}
    for package in profile.spec.packages:
        reference = package.image_reference()
        try:
            images[reference] = registry.resolve(reference)
        except FleetwrightError as err:
            images[reference] = f"unresolved: {err.reason}: {err}"
    return images


def _check_options(output: str, fleet: Path | None, kubeconfig: Path | None) -> None:
    if output not in ("table", "json", "yaml"):
        raise PlanInputError(f"-o must be table, json or yaml, not {output!r}")
    if (fleet is None) == (kubeconfig is None):
        raise PlanInputError(
            "give the fleet with either --fleet SNAPSHOT (a `kubectl get nodes -o json` file) "
            "or --kubeconfig FILE (the live cluster)"
        )


def _observed(
    fleet: Path | None,
    pods: Path | None,
    kubeconfig: Path | None,
    profile: NodeProfile,
    policy: DeploymentPolicy,
) -> Observations:
    """The fleet from the snapshot (with the pods file's workloads) or the live cluster."""
    if fleet is not None:
        observed = load_fleet(fleet, profile)
        return with_pods(observed, load_pods(pods), policy) if pods is not None else observed
    assert kubeconfig is not None  # one of the two, checked by _check_options
    observed, running = load_live_fleet(kubeconfig, profile)
    return with_pods(observed, running, policy)


@app.command("plan")
def plan_command(
    files: FilesArg,
    *,
    fleet: FleetOpt = None,
    pods: PodsOpt = None,
    kubeconfig: KubeconfigOpt = None,
    output: OutputOpt = "table",
    now: NowOpt = None,
    max_nodes: MaxNodesOpt = 40,
    rollback: RollbackOpt = False,
    previous: PreviousOpt = None,
    resolve: ResolveOpt = False,
    registry_ca_file: RegistryCaOpt = None,
) -> None:
    """Preview a rollout: batches, stages per node, drains and reboots, blocked nodes, ETA."""
    from rich.console import Console

    from fleetwright.planner import convert
    from fleetwright.planner.rollout.preview import preview, with_node_gate
    from fleetwright.planner.rollout.rollback import preview_inputs

    console = Console(soft_wrap=False, width=200 if output == "table" else None)
    try:
        _check_options(output, fleet, kubeconfig)
        profile, policy = load_inputs(files)
        replaced = _replaced(previous, kubeconfig, profile) if rollback else None
        spec = convert.rollout_spec(profile, policy, previous=replaced)
        observed = _observed(fleet, pods, kubeconfig, profile, policy)
        when = _clock(now)
        if rollback:
            spec, observed = preview_inputs(spec, observed, when)
        result = preview(spec, observed, when)
        if not rollback:  # a rollback's nodes skip the gate
            result = with_node_gate(result, policy.spec.resolved_gate())
        if resolve:
            result = result.model_copy(update={"images": resolve_images(profile, registry_ca_file)})
    except (PlanInputError, InvalidSpecError) as err:
        Console(stderr=True).print(f"[red]error:[/] {err}", highlight=False)
        raise typer.Exit(2) from err
    _print(result, output, console, max_nodes)


def _print(result: Plan, output: str, console: Console, max_nodes: int) -> None:
    """The plan as ``-o`` asks: its model as JSON or YAML, else the tables."""
    if output == "json":
        typer.echo(result.model_dump_json(indent=2))
    elif output == "yaml":
        import yaml

        typer.echo(yaml.safe_dump(result.model_dump(mode="json"), sort_keys=False).rstrip())
    else:
        from fleetwright.cli.planview import render

        render(result, console, max_nodes)
