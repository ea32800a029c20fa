"""Per-node work: actions by semver, config-only changes and their interrupts, dependency phases,
merged interrupts, resume after a restart, uninstall, and the annotation format."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwright.api.keys import state_key
from fleetwright.errors import InvalidSpecError
from fleetwright.planner.node.interrupts import (
    NO_INTERRUPT,
    REBOOT,
    Interrupt,
    InterruptKind,
    config_interrupt,
    merge,
    service_restart,
)
from fleetwright.planner.node.packages import (
    ConfigInterruptRule,
    DesiredPackage,
    PackageGraph,
    config_digests,
)
from fleetwright.planner.node.stages import Action, Stage
from fleetwright.planner.node.state import (
    NodePackageState,
    PackageRecord,
    PendingChange,
    format_annotation,
    parse_annotation,
    read_profile_state,
)
from fleetwright.planner.node.work import NodeStep, plan_node

pytestmark = pytest.mark.unit

RESTART_ALL = Interrupt(kind=InterruptKind.RESTART_ALL_SERVICES)


def pkg(name: str, version: str = "1.0.0", **kw: Any) -> DesiredPackage:
    return DesiredPackage(name=name, version=version, **kw)


def stages(steps: Iterable[NodeStep]) -> list[str]:
    return [f"{'+'.join(s.packages)}:{s.stage.value}" for s in steps]


# -- interrupts ---------------------------------------------------------------------------------


def test_merge_ranks_reboot_over_restart_all_over_service_over_noop() -> None:
    noop = Interrupt(kind=InterruptKind.NOOP)
    assert merge([noop, service_restart("a"), RESTART_ALL, REBOOT]).kind is InterruptKind.REBOOT
    assert merge([noop, service_restart("a"), RESTART_ALL]).kind is InterruptKind.RESTART_ALL_SERVICES
    assert merge([noop, service_restart("a")]) == service_restart("a")
    assert merge([noop, NO_INTERRUPT]).kind is InterruptKind.NOOP
    assert merge([]) == NO_INTERRUPT


def test_merge_unions_service_lists_and_a_reboot_carries_none() -> None:
    assert merge([service_restart("b", "a"), service_restart("c", "a")]).services == ("a", "b", "c")
    assert merge([service_restart("a"), REBOOT]).services == ()


def test_noop_interrupt_needs_no_drain_but_others_do() -> None:
    assert not Interrupt(kind=InterruptKind.NOOP).disruptive
    assert Interrupt(kind=InterruptKind.NOOP).present
    assert service_restart("x").disruptive
    assert REBOOT.disruptive


def test_config_interrupt_fires_only_for_matching_keys_and_globs() -> None:
    rules = [("sysctl*", service_restart("systemd-sysctl")), ("grub.cfg", REBOOT)]
    assert config_interrupt(["sysctl.conf"], rules) == service_restart("systemd-sysctl")
    assert config_interrupt(["limits.conf"], rules) == NO_INTERRUPT
    assert config_interrupt(["grub.cfg", "sysctl.d"], rules).kind is InterruptKind.REBOOT


# -- actions --------------------------------------------------------------------------------------


def test_fresh_node_installs_with_apply_config_and_the_package_interrupt() -> None:
    graph = PackageGraph([pkg("driver", "2.0.0", interrupt=REBOOT)])
    work = plan_node(graph, {})
    assert [p.action for p in work.packages] == [Action.INSTALL]
    assert stages(work.steps) == [
        "driver:apply",
        "driver:config",
        "driver:interrupt",
        "driver:post-interrupt",
    ]
    assert work.needs_drain
    assert work.needs_reboot


@pytest.mark.parametrize(
    ("installed", "action", "first"),
    [("1.0.0", Action.UPGRADE, Stage.UPGRADE), ("3.0.0", Action.DOWNGRADE, Stage.APPLY)],
)
def test_semver_decides_upgrade_or_downgrade(installed: str, action: Action, first: Stage) -> None:
    graph = PackageGraph([pkg("driver", "2.0.0")])
    work = plan_node(graph, {"driver": PackageRecord(version=installed)})
    assert work.packages[0].action is action
    assert work.steps[0].stage is first
    # No interrupt declared: no interrupt stage and no drain; and no uninstall on a downgrade.
    assert [s.stage for s in work.steps] == [first, Stage.CONFIG]
    assert not work.needs_drain


def test_semver_compares_numerically_not_as_text() -> None:
    graph = PackageGraph([pkg("driver", "1.10.0")])
    assert plan_node(graph, {"driver": PackageRecord(version="1.9.0")}).packages[0].action is Action.UPGRADE


def test_an_equal_version_and_config_needs_nothing() -> None:
    config = config_digests({"a": "1"})
    graph = PackageGraph([pkg("t", config=config, interrupt=REBOOT)])
    work = plan_node(graph, {"t": PackageRecord(version="1.0.0", config=config)})
    assert not work.needs_work
    assert work.steps == ()


def test_config_only_change_runs_config_and_only_the_mapped_interrupt() -> None:
    rules = (ConfigInterruptRule(pattern="sysctl*", interrupt=service_restart("systemd-sysctl")),)
    desired = config_digests({"sysctl.conf": "new", "limits.conf": "same"})
    old = config_digests({"sysctl.conf": "old", "limits.conf": "same"})
    graph = PackageGraph([pkg("t", config=desired, config_interrupts=rules, interrupt=REBOOT)])
    work = plan_node(graph, {"t": PackageRecord(version="1.0.0", config=old)})
    assert work.packages[0].action is Action.CONFIG
    assert work.packages[0].changed_keys == ("sysctl.conf",)
    # The package's own reboot is not used for a config-only change.
    assert work.interrupt == service_restart("systemd-sysctl")
    assert stages(work.steps) == ["t:config", "t:interrupt", "t:post-interrupt"]


def test_config_change_of_an_unmapped_key_has_no_interrupt_and_no_drain() -> None:
    rules = (ConfigInterruptRule(pattern="grub*", interrupt=REBOOT),)
    graph = PackageGraph([pkg("t", config=config_digests({"limits.conf": "2"}), config_interrupts=rules)])
    work = plan_node(
        graph, {"t": PackageRecord(version="1.0.0", config=config_digests({"limits.conf": "1"}))}
    )
    assert stages(work.steps) == ["t:config"]
    assert not work.needs_drain


def test_an_unreadable_recorded_version_is_reinstalled_not_guessed() -> None:
    graph = PackageGraph([pkg("t", "1.0.0")])
    assert plan_node(graph, {"t": PackageRecord(version="banana")}).packages[0].action is Action.INSTALL


# -- dependencies and merged interrupts -----------------------------------------------------------


def test_packages_ready_together_share_one_interrupt_and_dependents_wait_for_it() -> None:
    graph = PackageGraph(
        [
            pkg("driver", interrupt=REBOOT),
            pkg("tuning", interrupt=service_restart("kubelet")),
            pkg("dcgm", depends_on=("driver",), interrupt=service_restart("dcgm")),
        ]
    )
    work = plan_node(graph, {})
    assert stages(work.steps) == [
        "driver:apply", "driver:config", "tuning:apply", "tuning:config",
        "driver+tuning:interrupt", "driver:post-interrupt", "tuning:post-interrupt",
        "dcgm:apply", "dcgm:config", "dcgm:interrupt", "dcgm:post-interrupt",
    ]  # fmt: skip
    assert work.steps[4].interrupt == REBOOT  # the reboot covers the service restart
    assert work.interrupt_count == 2


def test_a_dependency_without_work_does_not_delay_its_dependent() -> None:
    graph = PackageGraph([pkg("driver"), pkg("dcgm", depends_on=("driver",))])
    work = plan_node(graph, {"driver": PackageRecord(version="1.0.0")})
    assert {p.package: p.phase for p in work.packages} == {"dcgm": 0}


def test_cycles_and_unknown_dependencies_are_spec_errors_naming_the_field() -> None:
    with pytest.raises(InvalidSpecError, match="cycle"):
        PackageGraph([pkg("a", depends_on=("b",)), pkg("b", depends_on=("a",))])
    with pytest.raises(InvalidSpecError, match=r"packages\[0\].dependsOn: unknown package 'zz'"):
        PackageGraph([pkg("a", depends_on=("zz",))])


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[DesiredPackage], dict[str, PackageRecord]]:
    count = draw(st.integers(1, 8))
    names = [f"p{i}" for i in range(count)]
    packages = []
    for i, name in enumerate(names):
        deps = draw(st.lists(st.sampled_from(names[:i]), unique=True)) if i else []
        kind = draw(st.sampled_from(list(InterruptKind)))
        interrupt = service_restart("u") if kind is InterruptKind.SERVICE else Interrupt(kind=kind)
        packages.append(pkg(name, "2.0.0", depends_on=tuple(deps), interrupt=interrupt))
    records = {
        n: PackageRecord(version=draw(st.sampled_from(["1.0.0", "2.0.0", "3.0.0"])))
        for n in names
        if draw(st.booleans())
    }
    return packages, records


@settings(max_examples=150, deadline=None)
@given(dags())
def test_dependency_order_is_respected_on_every_node(
    case: tuple[list[DesiredPackage], dict[str, PackageRecord]],
) -> None:
    packages, records = case
    graph = PackageGraph(list(reversed(packages)))  # input order must not matter
    work = plan_node(graph, records)
    with_work = {p.package for p in work.packages}
    finished_at: dict[str, int] = {}  # index of the last step of each package (incl. its interrupt)
    first_at: dict[str, int] = {}
    for index, step in enumerate(work.steps):
        for name in step.packages:
            first_at.setdefault(name, index)
            finished_at[name] = index
    for package in packages:
        for dep in package.depends_on:
            if package.name in with_work and dep in with_work:
                assert finished_at[dep] < first_at[package.name], (dep, package.name, work.steps)
    # Every package with an interrupt has exactly one interrupt step covering it, before its post stage.
    for p in work.packages:
        covering = [i for i, s in enumerate(work.steps) if s.stage.is_interrupt and p.package in s.packages]
        assert len(covering) == (1 if p.interrupt.present else 0)
    assert plan_node(graph, records) == work  # deterministic


# -- resume and uninstall -------------------------------------------------------------------------


def test_a_pending_change_to_the_same_target_resumes_after_the_last_passed_stage() -> None:
    graph = PackageGraph([pkg("driver", "2.0.0", interrupt=REBOOT)])
    pending = PendingChange(
        version="2.0.0",
        stages=(Stage.UPGRADE, Stage.CONFIG, Stage.INTERRUPT, Stage.POST_INTERRUPT),
        done=(Stage.UPGRADE, Stage.CONFIG, Stage.INTERRUPT),
    )
    work = plan_node(graph, {"driver": PackageRecord(version="1.0.0", pending=pending)})
    assert stages(work.steps) == ["driver:post-interrupt"]
    assert work.packages[0].resumed
    assert not work.needs_drain


def test_a_pending_change_to_another_target_is_replanned_from_what_is_installed() -> None:
    graph = PackageGraph([pkg("driver", "3.0.0")])
    pending = PendingChange(version="2.0.0", stages=(Stage.UPGRADE, Stage.CONFIG), done=(Stage.UPGRADE,))
    work = plan_node(graph, {"driver": PackageRecord(version="1.0.0", pending=pending)})
    assert stages(work.steps) == ["driver:upgrade", "driver:config"]
    assert not work.packages[0].resumed


def test_a_failed_change_to_the_current_target_marks_the_node_failed() -> None:
    graph = PackageGraph([pkg("driver", "2.0.0")])
    pending = PendingChange(
        version="2.0.0", stages=(Stage.UPGRADE, Stage.CONFIG), failed="config-check exited 1"
    )
    work = plan_node(graph, {"driver": PackageRecord(version="1.0.0", pending=pending)})
    assert work.failed == "driver: config-check exited 1"


def test_uninstall_runs_dependents_first_and_blocks_remaining_dependents() -> None:
    graph = PackageGraph(
        [
            pkg("base", uninstall=True, interrupt=REBOOT),
            pkg("addon", depends_on=("base",), uninstall=True),
            pkg("user", "2.0.0", depends_on=("base",)),
        ]
    )
    records = {n: PackageRecord(version="1.0.0") for n in ("base", "addon", "user")}
    work = plan_node(graph, records)
    assert stages(work.steps) == ["addon:uninstall", "base:uninstall", "base:uninstall-interrupt"]
    assert [b.package for b in work.blocked] == ["user"]
    assert work.blocked[0].reason.startswith("DependencyUninstalled")


def test_a_package_dropped_from_the_profile_is_left_in_place() -> None:
    graph = PackageGraph([pkg("kept")])
    work = plan_node(
        graph, {"kept": PackageRecord(version="1.0.0"), "dropped": PackageRecord(version="1.0.0")}
    )
    assert not work.needs_work


# -- annotation format ----------------------------------------------------------------------------


def test_annotation_round_trips_and_is_keyed_per_profile() -> None:
    state = NodePackageState(
        profile="gpu-host",
        packages={
            "driver": PackageRecord(
                version="1.0.0",
                config={"k": "abc"},
                pending=PendingChange(version="2.0.0", stages=(Stage.UPGRADE,), done=()),
            )
        },
    )
    key, value = format_annotation(state)
    assert key == "fleetwright.io/state.gpu-host"
    assert parse_annotation(key, value) == state
    assert read_profile_state({key: value}, "gpu-host") == state
    assert read_profile_state({key: value}, "other").packages == {}


def test_long_profile_names_get_a_short_unique_key() -> None:
    long_a, long_b = "a" * 80 + ".x", "a" * 80 + ".y"
    key_a, key_b = state_key(long_a), state_key(long_b)
    assert key_a != key_b
    assert all(len(k.split("/", 1)[1]) <= 63 for k in (key_a, key_b))
    state = NodePackageState(profile=long_a)
    assert parse_annotation(*format_annotation(state)) == state


def test_a_corrupt_annotation_is_an_error_not_an_empty_state() -> None:
    with pytest.raises(InvalidSpecError, match="unreadable package state"):
        parse_annotation("fleetwright.io/state.p", "{not json")
    with pytest.raises(InvalidSpecError, match="records profile"):
        parse_annotation("fleetwright.io/state.p", format_annotation(NodePackageState(profile="q"))[1])
