"""The ``interrupt`` mode: decodes the interrupt and runs its host commands once per resource id
(docs/package-format.md §13).

It owns the interrupt encoding, the command list per type, the per-command completion flags
(``<type>_<i>.complete``, the v6 names, so a node that moves over mid-interrupt resumes at the right
command) and the boot-id-confirmed reboot: before ``reboot`` runs, a ``<type>_<i>.pending`` marker
records the current boot id, and the command counts as complete only once a later invocation sees
a different boot id. It must not read ``config.json``: identity comes from ``SKYHOOK_RESOURCE_ID``.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

from fleetwright.agent import executor, logs, signals
from fleetwright.agent.settings import HostPaths, ResourceId

NODE_RESTART = "node_restart"
SERVICE_RESTART = "service_restart"
RESTART_ALL = "restart_all_services"
NO_OP = "no_op"
SCRIPT = "script_interrupt"
TYPES = (NODE_RESTART, SERVICE_RESTART, RESTART_ALL, NO_OP, SCRIPT)
SIGTERM_CODE = -15


class InterruptError(Exception):
    pass


@dataclass(frozen=True)
class InterruptRequest:
    type: str
    services: tuple[str, ...] = ()

    def commands(self) -> list[list[str]]:
        if self.type == NODE_RESTART:
            return [["reboot"]]
        if self.type == RESTART_ALL:
            # Re-applies sysctl settings; despite the name it restarts no service
            # (docs/package-format.md §13.1).
            return [["service", "procps", "force-reload"]]
        if self.type == SERVICE_RESTART:
            return [["systemctl", "daemon-reload"], *(["systemctl", "restart", s] for s in self.services)]
        return []


def decode(data: str) -> InterruptRequest:
    """Decode base64 JSON ``{"type": ..., "services": [...]}``; every problem names its field."""
    try:
        doc = json.loads(base64.b64decode(data, validate=True).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InterruptError(f"interrupt data: not base64-encoded JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise InterruptError("interrupt data: must be a JSON object")
    problems = []
    kind = doc.get("type")
    if kind not in TYPES:
        problems.append(f"interrupt.type: must be one of {', '.join(TYPES)}, got {kind!r}")
    allowed = {"type", "services"} if kind == SERVICE_RESTART else {"type"}
    problems += [f"interrupt.{key}: not allowed for type {kind}" for key in sorted(set(doc) - allowed)]
    services = doc.get("services")
    if kind == SERVICE_RESTART and (
        not isinstance(services, list) or not services or not all(isinstance(s, str) and s for s in services)
    ):
        problems.append("interrupt.services: must be a non-empty array of unit names")
    if problems:
        raise InterruptError("; ".join(problems))
    return InterruptRequest(type=str(kind), services=tuple(services or ()))


def encode(interrupt: InterruptRequest) -> str:
    doc: dict[str, object] = {"type": interrupt.type}
    if interrupt.services:
        doc["services"] = list(interrupt.services)
    return base64.b64encode(json.dumps(doc).encode()).decode()


def read_boot_id(paths: HostPaths) -> str:
    # Read through the root mount so that tests (and odd runtimes) can supply the host's value.
    for candidate in (paths.boot_id_file(), "/proc/sys/kernel/random/boot_id"):
        try:
            with open(candidate, encoding="utf-8") as handle:
                return handle.read().strip()
        except OSError:
            continue
    raise InterruptError("cannot read the host boot id")


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


class _Runner:
    def __init__(self, paths: HostPaths, rid: ResourceId, env: Mapping[str, str]) -> None:
        self.paths = paths
        self.rid = rid
        self.env = env
        self.flags = paths.interrupt_flags(rid.raw)

    def flag(self, kind: str, index: int, suffix: str) -> str:
        return os.path.join(self.flags, f"{kind}_{index}.{suffix}")

    def execute(self, kind: str, index: int, argv: list[str]) -> executor.ProcessOutcome:
        logs.say(f"interrupt {kind}[{index}]: running {' '.join(argv)}")
        base = None
        if self.paths.settings.write_logs:
            base = os.path.join(
                self.paths.logs, self.rid.package, self.rid.version, "interrupts", f"{kind}_{index}"
            )
        # Interrupt commands get no STEP_ROOT/SKYHOOK_DIR and no chmod (docs/package-format.md §13.2).
        return executor.run(argv, root=self.paths.root, cwd=self.paths.copy_dir, env=self.env, log_base=base)

    def plain(self, kind: str, index: int, argv: list[str]) -> bool:
        done = self.flag(kind, index, "complete")
        if os.path.exists(done):
            logs.say(f"interrupt {kind}[{index}] already complete; skipping")
            return True
        _write(done, str(time.time()))  # written first, as in v6: a crash mid-command counts as done
        result = self.execute(kind, index, argv)
        if result.returncode != 0:
            os.remove(done)
            reason = result.error or f"exit code {result.returncode}"
            logs.error(f"interrupt {kind}[{index}] failed: {reason}")
            return False
        return True

    def reboot(self, index: int, argv: list[str]) -> bool:
        done, pending = self.flag(NODE_RESTART, index, "complete"), self.flag(NODE_RESTART, index, "pending")
        if os.path.exists(done):
            logs.say(f"interrupt {NODE_RESTART}[{index}] already complete; skipping")
            return True
        boot_id = read_boot_id(self.paths)
        if os.path.exists(pending):
            with open(pending, encoding="utf-8") as handle:
                before = handle.read().strip()
            if before != boot_id:
                os.replace(pending, done)
                logs.say(f"reboot confirmed: boot id changed from {before} to {boot_id}")
                return True
            logs.warn(f"reboot pending but boot id {boot_id} is unchanged: it did not happen; retrying")
            os.remove(pending)
        _write(pending, boot_id + "\n")
        result = self.execute(NODE_RESTART, index, argv)
        if result.returncode == SIGTERM_CODE or signals.stop_requested():
            logs.say("reboot in progress (shutdown has begun); completion is recognised after a new boot id")
            return False
        if result.returncode != 0:
            os.remove(pending)
            logs.error(f"reboot failed: {result.error or f'exit code {result.returncode}'}")
            return False
        if signals.wait(self.paths.settings.reboot_wait_seconds):
            logs.say("reboot in progress (agent asked to stop); completion is recognised after a new boot id")
            return False
        # Keep the marker: if the reboot happens later after all, the next run sees a new boot id.
        logs.error(
            f"reboot was enqueued but did not take effect within {self.paths.settings.reboot_wait_seconds}s"
        )
        return False


def run(paths: HostPaths, rid: ResourceId, interrupt: InterruptRequest, env: Mapping[str, str]) -> bool:
    runner = _Runner(paths, rid, env)
    if interrupt.type == NO_OP:
        _write(os.path.join(runner.flags, f"{NO_OP}.complete"), str(time.time()))
        logs.say("no_op interrupt: nothing to do")
        return True
    for index, argv in enumerate(interrupt.commands()):
        if interrupt.type == NODE_RESTART:
            ok = runner.reboot(index, argv)
        else:
            ok = runner.plain(interrupt.type, index, argv)
        if not ok:
            return False
    logs.say(f"interrupt {interrupt.type} complete")
    return True
