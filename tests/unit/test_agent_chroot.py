"""The agent end to end: real step scripts in a chroot of a busybox/bash-static root (needs root).

Each test builds a throwaway host root, copies a package payload to a copy directory in it, and
runs ``python -m fleetwright.agent`` exactly as the stage Job does, then inspects the host state.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from fleetwright.agent import interrupts, state
from fleetwright.packagetest.boot import simulate_reboot
from fleetwright.packagetest.hostroot import HostRoot
from fleetwright.packagetest.runner import AgentRun, agent_env, install_payload, run_agent
from tests.support.payloads import step, write_package
from tests.support.waiting import wait_for

pytestmark = pytest.mark.unit

COPY_DIR = "/var/lib/skyhook/test/demo-1.0.0-uid-1"
STATE = "/var/lib/skyhook/test"
OK_CHECK = "#!/bin/sh\nexit 0\n"


class Pkg:
    """A package payload installed in a test host, plus helpers to invoke the agent on it."""

    def __init__(self, host: HostRoot, tmp: Path, version: str = "1.0.0", copy_dir: str = COPY_DIR) -> None:
        self.host, self.tmp, self.version, self.copy_dir = host, tmp, version, copy_dir

    def install(
        self,
        modes: Mapping[str, list[dict[str, object]]],
        scripts: Mapping[str, str],
        configmaps: Mapping[str, str] | None = None,
        **kwargs: object,
    ) -> Pkg:
        payload = str(self.tmp / f"payload-{self.version}")
        write_package(payload, modes, scripts, version=self.version, **kwargs)  # type: ignore[arg-type]
        install_payload(self.host, payload, self.copy_dir, configmaps)
        return self

    def env(self, **extra: str) -> dict[str, str]:
        return agent_env("demo", self.version, extra)

    def run(self, mode: str, **extra: str) -> AgentRun:
        return run_agent([mode, self.host.path, self.copy_dir], self.env(**extra))

    def interrupt(self, payload: interrupts.InterruptRequest, **extra: str) -> AgentRun:
        args = ["interrupt", self.host.path, self.copy_dir, interrupts.encode(payload)]
        return run_agent(args, self.env(**extra))


def record(name: str) -> str:
    """A script that appends ``name $@`` to /tmp/ran on the host, then exits with $EXIT_CODE."""
    return f'#!/bin/sh\necho "{name} $*" >> /tmp/ran\necho "{name} ran"\nexit "${{EXIT_CODE:-0}}"\n'


def ran(host: HostRoot) -> list[str]:
    return host.read("/tmp/ran").splitlines() if host.exists("/tmp/ran") else []


def test_apply_then_check_runs_in_chroot_with_documented_environment(host: HostRoot, tmp_path: Path) -> None:
    script = (
        "#!/bin/sh\n"
        'echo "pwd=$(pwd) step_root=$STEP_ROOT dir=$SKYHOOK_DIR id=$SKYHOOK_RESOURCE_ID" > /tmp/env\n'
        'echo "state=$SKYHOOK_ROOT_DIR logs=$SKYHOOK_LOG_DIR" >> /tmp/env\n'
        'echo "order=$SKYHOOK_NODE_ORDER mine=$MINE" >> /tmp/env\n'
        "sysctl -w vm.swappiness=10\necho oops >&2\n"
    )
    check = '#!/bin/sh\n[ "$(sysctl -n vm.swappiness)" = 10 ]\n'
    pkg = Pkg(host, tmp_path).install(
        {
            "apply": [step("apply.sh", env={"MINE": "yes", "STEP_ROOT": "hijack"})],
            "apply-check": [step("apply_check.sh")],
        },
        {"apply.sh": script, "apply_check.sh": check},
    )
    result = pkg.run("apply")
    assert result.returncode == 0, result.output
    assert host.read("/tmp/env").splitlines() == [
        f"pwd={COPY_DIR} step_root={COPY_DIR}/skyhook_dir dir={COPY_DIR} id=test-0000-1_demo_1.0.0",
        "state=/var/lib/skyhook/test logs=/var/log/skyhook/test",
        "order=0 mine=yes",
    ]
    assert host.sysctl("vm.swappiness") == "10"
    # Pod log: timestamped, tagged lines.
    assert any(line.endswith("INFO [err] oops") and line[:4].isdigit() for line in result.output.splitlines())
    check_run = pkg.run("apply-check")
    assert check_run.returncode == 0, check_run.output
    history = json.loads(host.read(f"{STATE}/history/demo.json"))
    assert history["current-version"] == "1.0.0"
    assert host.read(f"{STATE}/flags/check_results") == "apply_check.sh False\n"
    assert host.exists(f"{STATE}/flags/apply-check_ALL_CHECKED")
    assert host.exists(f"{STATE}/flags/START")
    log_dir = Path(host.host("/var/log/skyhook/test/demo/1.0.0"))
    logs = sorted(p.name for p in log_dir.iterdir())
    assert [n.split("-")[0] for n in logs] == ["apply.sh", "apply.sh", "apply_check.sh", "apply_check.sh"]
    err_log = next(p for p in log_dir.iterdir() if p.name.startswith("apply.sh") and p.name.endswith(".err"))
    assert err_log.read_text() == "oops\n"


def test_failing_check_fails_the_stage_but_runs_every_check(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {"apply": [step("a.sh")], "apply-check": [step("c1.sh"), step("c2.sh"), step("c3.sh")]},
        {
            "a.sh": record("a"),
            "c1.sh": record("c1"),
            "c2.sh": "#!/bin/sh\necho bad state\nexit 1\n",
            "c3.sh": record("c3"),
        },
    )
    result = pkg.run("apply-check")
    assert result.returncode == 1
    assert ran(host) == ["c1 ", "c3 "]
    assert host.read(f"{STATE}/flags/check_results") == "c1.sh False\nc2.sh True\nc3.sh False\n"
    assert not host.exists(f"{STATE}/history/demo.json")
    assert not host.exists(f"{STATE}/flags/apply-check_ALL_CHECKED")
    assert "apply-check failed: c2.sh" in result.output


def test_work_mode_stops_at_the_first_failure(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {"config": [step("one.sh"), step("two.sh")], "config-check": [step("c.sh")]},
        {"one.sh": record("one"), "two.sh": record("two"), "c.sh": OK_CHECK},
    )
    assert pkg.run("config", EXIT_CODE="4").returncode == 1
    assert ran(host) == ["one "]


def test_unexpected_return_code_fails_and_listed_code_passes(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {
            "config": [step("three.sh", codes=(0, 3))],
            "config-check": [step("c.sh")],
            "apply": [step("x.sh")],
            "apply-check": [step("c.sh")],
        },
        {"three.sh": record("three"), "x.sh": record("x"), "c.sh": OK_CHECK},
    )
    assert pkg.run("config", EXIT_CODE="3").returncode == 0
    failed = pkg.run("apply", EXIT_CODE="3")
    assert failed.returncode == 1
    assert "exit code 3 is not an allowed return code [0]" in failed.output


def test_env_argument_is_substituted_from_the_agent_environment(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {"config": [step("s.sh", "literal", "env:DRIVER_VERSION")], "config-check": [step("c.sh")]},
        {"s.sh": record("s"), "c.sh": OK_CHECK},
    )
    assert pkg.run("config", DRIVER_VERSION="550.1").returncode == 0
    assert ran(host) == ["s literal 550.1"]
    missing = pkg.run("config")
    assert missing.returncode == 1
    assert "unset environment variable(s): DRIVER_VERSION" in missing.output
    assert ran(host) == ["s literal 550.1"]  # the step never started


def test_idempotent_skip_and_its_exceptions(host: HostRoot, tmp_path: Path) -> None:
    tracked = step("tracked.sh", "apply", idempotence=False)
    pkg = Pkg(host, tmp_path).install(
        {
            "apply": [tracked, step("always.sh")],
            "apply-check": [step("c.sh")],
            "config": [step("tracked.sh", "apply", idempotence=False)],
            "config-check": [step("c.sh")],
        },
        {"tracked.sh": record("tracked"), "always.sh": record("always"), "c.sh": OK_CHECK},
    )
    assert pkg.run("apply").returncode == 0
    flag = f"{STATE}/flags/demo/1.0.0/tracked.sh_WydhcHBseSddX1swXQ=="  # NodeWright's own flag name
    assert host.exists(flag)
    assert host.exists(state.flag_path(f"{STATE}/flags/demo/1.0.0", "always.sh", [], [0]))
    second = pkg.run("apply")
    assert "SKIPPED: tracked.sh" in second.output
    assert ran(host) == ["tracked apply", "always ", "always "]
    # Exceptions: OVERLAY_ALWAYS_RUN_STEP, and modes other than apply/post-interrupt.
    assert pkg.run("apply", OVERLAY_ALWAYS_RUN_STEP="true").returncode == 0
    assert pkg.run("config").returncode == 0
    assert ran(host)[3:] == ["tracked apply", "always ", "tracked apply"]


def test_new_version_runs_every_step_again(host: HostRoot, tmp_path: Path) -> None:
    modes = {"apply": [step("t.sh", idempotence=False)], "apply-check": [step("c.sh")]}
    scripts = {"t.sh": record("t"), "c.sh": OK_CHECK}
    old = Pkg(host, tmp_path).install(modes, scripts)
    assert old.run("apply").returncode == 0
    assert old.run("apply").returncode == 0
    new = Pkg(host, tmp_path, "1.1.0", "/var/lib/skyhook/test/demo-1.1.0-uid-2").install(modes, scripts)
    assert new.run("apply").returncode == 0
    assert ran(host) == ["t ", "t "]


def test_upgrade_receives_previous_and_current_versions(host: HostRoot, tmp_path: Path) -> None:
    env_script = '#!/bin/sh\necho "env $PREVIOUS_VERSION $CURRENT_VERSION" >> /tmp/ran\n'
    modes = {
        "apply": [step("a.sh")],
        "apply-check": [step("c.sh")],
        "upgrade": [step("up.sh", upgrade_step=True), step("env.sh")],
        "upgrade-check": [step("up_check.sh", upgrade_step=True)],
    }
    scripts = {"a.sh": OK_CHECK, "c.sh": OK_CHECK, "up.sh": record("up"), "env.sh": env_script}
    scripts["up_check.sh"] = record("up_check")
    v1 = Pkg(host, tmp_path).install(modes, scripts)
    assert v1.run("upgrade").returncode == 0  # no history yet
    assert ran(host) == ["up unknown 1.0.0", "env unknown 1.0.0"]
    assert v1.run("apply").returncode == 0
    assert v1.run("apply-check").returncode == 0
    v2 = Pkg(host, tmp_path, "2.0.0", "/var/lib/skyhook/test/demo-2.0.0-uid-2").install(modes, scripts)
    assert v2.run("upgrade").returncode == 0
    assert v2.run("upgrade-check").returncode == 0
    assert ran(host)[2:] == ["up 1.0.0 2.0.0", "env 1.0.0 2.0.0", "up_check 1.0.0 2.0.0"]
    history = json.loads(host.read(f"{STATE}/history/demo.json"))
    assert history["current-version"] == "2.0.0"
    assert [h["version"] for h in history["history"]] == ["2.0.0", "1.0.0"]


def test_uninstall_clears_flags_and_records_uninstalled(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {
            "apply": [step("a.sh", idempotence=False)],
            "apply-check": [step("c.sh")],
            "uninstall": [step("u.sh")],
            "uninstall-check": [step("c.sh")],
        },
        {"a.sh": record("a"), "c.sh": OK_CHECK, "u.sh": record("u")},
        expected_config_files=["settings.conf"],
        configmaps={"settings.conf": "x=1\n"},
    )
    assert pkg.run("apply").returncode == 0
    assert host.exists(f"{STATE}/flags/demo/1.0.0")
    os.remove(host.host(f"{COPY_DIR}/configmaps/settings.conf"))  # uninstall does not need config
    assert pkg.run("uninstall").returncode == 0
    assert host.exists(f"{STATE}/flags/demo/1.0.0")  # only a passing uninstall-check clears them
    assert pkg.run("uninstall-check").returncode == 0
    assert not host.exists(f"{STATE}/flags/demo/1.0.0")
    assert json.loads(host.read(f"{STATE}/history/demo.json"))["current-version"] == "uninstalled"


def test_root_dir_overlay_lands_on_the_host_through_host_symlinks(host: HostRoot, tmp_path: Path) -> None:
    # On the host, /etc/alt is an absolute symlink: it must resolve inside the host, not the agent.
    os.makedirs(host.host("/opt/real"))
    os.symlink("/opt/real", host.host("/etc/alt"))
    os.chmod(host.host("/etc"), 0o755)
    pkg = Pkg(host, tmp_path).install(
        {
            "apply": [step("a.sh")],
            "apply-check": [step("c.sh")],
            "uninstall": [step("c.sh")],
            "uninstall-check": [step("c.sh")],
        },
        {"a.sh": "#!/bin/sh\ncat /etc/fleet/tool.conf > /tmp/seen\n", "c.sh": OK_CHECK},
        root_dir={"etc/fleet/tool.conf": "overlay=1\n", "etc/alt/inside.conf": "via link\n"},
    )
    os.chmod(f"{pkg.tmp}/payload-1.0.0/root_dir/etc", 0o700)
    install_payload(host, f"{pkg.tmp}/payload-1.0.0", COPY_DIR)
    assert pkg.run("uninstall").returncode == 0
    assert not host.exists("/etc/fleet/tool.conf")  # no overlay in uninstall modes
    assert pkg.run("apply").returncode == 0
    assert host.read("/tmp/seen") == "overlay=1\n"
    assert host.read("/opt/real/inside.conf") == "via link\n"
    assert os.stat(host.host("/etc")).st_mode & 0o777 == 0o755  # existing host dirs keep their mode


def test_missing_expected_config_file_fails_before_touching_the_host(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {"apply": [step("a.sh")], "apply-check": [step("c.sh")]},
        {"a.sh": record("a"), "c.sh": OK_CHECK},
        expected_config_files=["grub.conf", "sysctl.conf"],
        configmaps={"sysctl.conf": "vm.swappiness=1\n"},
        root_dir={"etc/marker": "x"},
    )
    result = pkg.run("apply")
    assert result.returncode == 1
    assert "expected_config_files missing from configmaps/: grub.conf" in result.output
    assert not host.exists("/etc/marker")
    assert not host.exists(f"{STATE}/flags")
    assert ran(host) == []


def test_malformed_config_is_rejected_with_the_field_named_and_no_host_change(
    host: HostRoot, tmp_path: Path
) -> None:
    bad = step("a.sh")
    bad["returncodes"] = ["zero"]
    pkg = Pkg(host, tmp_path).install(
        {"apply": [bad], "apply-check": [step("missing_check.sh")]},
        {"a.sh": record("a")},
        root_dir={"etc/marker": "x"},
    )
    result = pkg.run("apply")
    assert result.returncode == 1
    assert "config.json invalid: modes.apply[0].returncodes[0]: must be an integer" in result.output
    assert "config.json invalid: modes.apply-check[0].path: missing_check.sh does not exist" in result.output
    assert not host.exists("/etc/marker")
    assert not host.exists(STATE + "/flags")
    assert ran(host) == []


def test_mode_without_steps_is_a_noop_that_still_records_history(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {"config": [step("s.sh")], "config-check": [step("c.sh")]}, {"s.sh": OK_CHECK, "c.sh": OK_CHECK}
    )
    assert pkg.run("apply").returncode == 0
    assert pkg.run("apply-check").returncode == 0
    assert json.loads(host.read(f"{STATE}/history/demo.json"))["current-version"] == "1.0.0"


def test_a_preflight_of_a_package_without_check_steps_fails_saying_so(host: HostRoot, tmp_path: Path) -> None:
    # Checks only for its removal: nothing can tell whether its (empty) install side is done.
    pkg = Pkg(host, tmp_path).install(
        {"apply": [], "uninstall": [step("s.sh")], "uninstall-check": [step("c.sh")]},
        {"s.sh": OK_CHECK, "c.sh": OK_CHECK},
    )
    result = pkg.run("apply-check", FLEETWRIGHT_PREFLIGHT="true")
    assert result.returncode == 1
    assert "demo defines no check step a preflight of apply-check can run" in result.output
    assert not host.exists(f"{STATE}/history/demo.json")  # nothing recorded as installed
    assert pkg.run("apply-check").returncode == 0  # outside a preflight: a no-op


def test_a_preflight_check_of_a_mode_without_steps_passes_when_the_package_has_checks(
    host: HostRoot, tmp_path: Path
) -> None:
    pkg = Pkg(host, tmp_path).install(
        {"apply": [step("s.sh")], "apply-check": [step("c.sh")]}, {"s.sh": OK_CHECK, "c.sh": OK_CHECK}
    )
    # config has no steps: its stage changes nothing, so there is nothing to find undone.
    assert pkg.run("config-check", FLEETWRIGHT_PREFLIGHT="true").returncode == 0


def test_a_preflight_check_changes_nothing_on_the_host_before_it_runs(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {"apply": [step("a.sh")], "apply-check": [step("c.sh")]},
        {"a.sh": record("a"), "c.sh": "#!/bin/sh\ntest -f /etc/marker\n"},
        root_dir={"etc/marker": "x"},
    )
    assert pkg.run("apply-check", FLEETWRIGHT_PREFLIGHT="true").returncode == 1
    assert not host.exists("/etc/marker")  # no root_dir overlay in a preflight
    assert pkg.run("apply-check").returncode == 0  # the real check merges it first
    assert host.exists("/etc/marker")
    assert pkg.run("apply-check", FLEETWRIGHT_PREFLIGHT="true").returncode == 0
    assert json.loads(host.read(f"{STATE}/history/demo.json"))["current-version"] == "1.0.0"
    assert ran(host) == []


def test_off_host_step_runs_in_the_host_chroot_like_every_step(host: HostRoot, tmp_path: Path) -> None:
    # NodeWright's production agent ignores on_host and always chroots; so does fleetwright's.
    script = '#!/bin/sh\necho "$STEP_ROOT $(cat /etc/hostname)" > "$SKYHOOK_DIR/off-host"\n'
    pkg = Pkg(host, tmp_path).install(
        {"config": [step("o.sh", on_host=False)], "config-check": [step("c.sh")]},
        {"o.sh": script, "c.sh": OK_CHECK},
    )
    result = pkg.run("config")
    assert result.returncode == 0, result.output
    assert host.read(f"{COPY_DIR}/off-host") == f"{COPY_DIR}/skyhook_dir test-node\n"
    assert "modes.config[0].on_host: false is ignored: every step runs in the host's chroot" in result.output


def test_resolv_conf_is_never_copied(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {"config": [step("s.sh")], "config-check": [step("c.sh")]}, {"s.sh": OK_CHECK, "c.sh": OK_CHECK}
    )
    result = pkg.run("config", COPY_RESOLV="true")
    assert result.returncode == 0
    assert "COPY_RESOLV=true is ignored" in result.output
    assert not host.exists("/etc/resolv.conf")


def test_sigterm_finishes_the_running_step_and_starts_no_other(host: HostRoot, tmp_path: Path) -> None:
    slow = "#!/bin/sh\necho started > /tmp/slow\nsleep 1\necho finished >> /tmp/slow\n"
    pkg = Pkg(host, tmp_path).install(
        {"config": [step("slow.sh"), step("next.sh")], "config-check": [step("c.sh")]},
        {"slow.sh": slow, "next.sh": record("next"), "c.sh": OK_CHECK},
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleetwright.agent", "config", host.path, COPY_DIR],
        env=pkg.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_for(lambda: host.exists("/tmp/slow"), 20, "the slow step to start", interval=0.05)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1, output
    assert host.read("/tmp/slow") == "started\nfinished\n"
    assert ran(host) == []
    assert "SIGTERM received: not starting next.sh" in output


# -- interrupts --------------------------------------------------------------------------------


def reboot_flags(host: HostRoot) -> list[str]:
    directory = host.host(f"{STATE}/interrupts/flags/test-0000-1_demo_1.0.0")
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def reboots(host: HostRoot) -> int:
    return sum(1 for call in host.calls() if call.startswith("reboot"))


def test_reboot_completes_only_after_the_boot_id_changes(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {"config": [step("s.sh")], "config-check": [step("c.sh")]}, {"s.sh": OK_CHECK, "c.sh": OK_CHECK}
    )
    reboot = interrupts.InterruptRequest(interrupts.NODE_RESTART)
    first_boot = host.boot_id()
    # The fake reboot only queues: the agent is still alive after its wait, which is a failure.
    first = pkg.interrupt(reboot)
    assert first.returncode == 1
    assert "did not take effect" in first.output
    assert reboot_flags(host) == ["node_restart_0.pending"]
    assert (
        host.read(f"{STATE}/interrupts/flags/test-0000-1_demo_1.0.0/node_restart_0.pending").strip()
        == first_boot
    )
    # Restarted on the same boot: the stale marker is dropped and the reboot is asked for again.
    again = pkg.interrupt(reboot)
    assert again.returncode == 1
    assert "unchanged" in again.output
    assert reboots(host) == 2
    # The node really reboots: the next invocation recognises completion without rebooting again.
    simulate_reboot(host)
    done = pkg.interrupt(reboot)
    assert done.returncode == 0, done.output
    assert reboot_flags(host) == ["node_restart_0.complete"]
    assert reboots(host) == 2
    assert pkg.interrupt(reboot).returncode == 0
    assert reboots(host) == 2
    # Interrupt logs go under the package from SKYHOOK_RESOURCE_ID.
    assert os.listdir(host.host("/var/log/skyhook/test/demo/1.0.0/interrupts"))


def test_reboot_killed_by_shutdown_keeps_the_marker(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {"config": [step("s.sh")], "config-check": [step("c.sh")]}, {"s.sh": OK_CHECK, "c.sh": OK_CHECK}
    )
    host.fake_state("reboot-mode", "sigterm")
    result = pkg.interrupt(interrupts.InterruptRequest(interrupts.NODE_RESTART))
    assert result.returncode == 1
    assert "shutdown has begun" in result.output
    assert reboot_flags(host) == ["node_restart_0.pending"]
    simulate_reboot(host)
    assert pkg.interrupt(interrupts.InterruptRequest(interrupts.NODE_RESTART)).returncode == 0
    assert reboot_flags(host) == ["node_restart_0.complete"]


def test_failed_reboot_command_drops_the_marker(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {"config": [step("s.sh")], "config-check": [step("c.sh")]}, {"s.sh": OK_CHECK, "c.sh": OK_CHECK}
    )
    host.fake_state("reboot-mode", "fail")
    assert pkg.interrupt(interrupts.InterruptRequest(interrupts.NODE_RESTART)).returncode == 1
    assert reboot_flags(host) == []


def test_service_restart_runs_once_per_resource_id(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {"config": [step("s.sh")], "config-check": [step("c.sh")]}, {"s.sh": OK_CHECK, "c.sh": OK_CHECK}
    )
    restart = interrupts.InterruptRequest(interrupts.SERVICE_RESTART, ("containerd.service", "kubelet"))
    host.fake_state("failing-units/kubelet.service")
    assert pkg.interrupt(restart).returncode == 1
    assert reboot_flags(host) == ["service_restart_0.complete", "service_restart_1.complete"]
    os.remove(host.host("/var/lib/fake-host/failing-units/kubelet.service"))
    assert pkg.interrupt(restart).returncode == 0
    assert host.calls() == [
        "systemctl daemon-reload",
        "systemctl restart containerd.service",
        "systemctl restart kubelet",
        "systemctl restart kubelet",
    ]
    assert host.unit_state("kubelet.service") == "active"
    assert pkg.interrupt(restart).returncode == 0
    assert len(host.calls()) == 4  # nothing re-ran


def test_restart_all_services_reloads_sysctl_and_noop_writes_its_flag(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {"config": [step("s.sh")], "config-check": [step("c.sh")]}, {"s.sh": OK_CHECK, "c.sh": OK_CHECK}
    )
    host.write("/etc/sysctl.d/99-test.conf", "vm.max_map_count = 262144\n")
    assert pkg.interrupt(interrupts.InterruptRequest(interrupts.RESTART_ALL)).returncode == 0
    assert host.sysctl("vm.max_map_count") == "262144"
    assert host.calls()[0] == "service procps force-reload"
    assert pkg.interrupt(interrupts.InterruptRequest(interrupts.NO_OP)).returncode == 0
    assert "no_op.complete" in reboot_flags(host)


def test_interrupt_needs_the_resource_id(host: HostRoot, tmp_path: Path) -> None:
    pkg = Pkg(host, tmp_path).install(
        {"config": [step("s.sh")], "config-check": [step("c.sh")]}, {"s.sh": OK_CHECK, "c.sh": OK_CHECK}
    )
    env = pkg.env()
    del env["SKYHOOK_RESOURCE_ID"]
    data = interrupts.encode(interrupts.InterruptRequest(interrupts.NO_OP))
    result = run_agent(["interrupt", host.path, COPY_DIR, data], env)
    assert result.returncode == 1
    assert "needs SKYHOOK_RESOURCE_ID" in result.output
