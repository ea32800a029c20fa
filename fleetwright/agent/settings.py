"""The agent's environment settings (docs/package-format.md §4) and the host paths they give (§16).

It owns reading ``SKYHOOK_*`` and related variables into one immutable ``Settings`` value and
turning host-absolute paths into paths under the root mount. It does no I/O besides ``os.environ``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_STATE_ROOT = "/etc/skyhook"
DEFAULT_LOG_ROOT = "/var/log/skyhook"
DEFAULT_DATA_DIR = "/skyhook-package"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
# How long an agent that asked for a reboot waits to be killed before it calls the reboot a failure.
DEFAULT_REBOOT_WAIT_SECONDS = 10.0


class SettingsError(Exception):
    """An environment variable has a value the agent cannot work with."""


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    # Only the case-insensitive string "true" is true (docs/package-format.md §4.2).
    value = env.get(name)
    return default if value is None else value.strip().lower() == "true"


@dataclass(frozen=True)
class ResourceId:
    """``SKYHOOK_RESOURCE_ID``: ``<cr>-<cr-uid>-<generation>_<pkg>_<version>``."""

    raw: str
    owner: str
    package: str
    version: str

    @classmethod
    def parse(cls, raw: str) -> ResourceId:
        parts = raw.split("_")
        if len(parts) != 3 or not all(parts):
            raise SettingsError(
                f"SKYHOOK_RESOURCE_ID must be <cr>-<uid>-<generation>_<package>_<version> "
                f"(three fields separated by '_'), got {raw!r}"
            )
        return cls(raw=raw, owner=parts[0], package=parts[1], version=parts[2])


@dataclass(frozen=True)
class Settings:
    resource_id: ResourceId | None
    state_root: str
    log_root: str
    write_logs: bool
    always_run_step: bool
    copy_resolv_requested: bool
    data_dir: str
    reboot_wait_seconds: float
    preflight: bool = False
    """``FLEETWRIGHT_PREFLIGHT``: a check mode run before its work, on a node in service
    (docs/package-format.md §10): no overlay, and a mode without steps fails."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        raw_id = env.get("SKYHOOK_RESOURCE_ID")
        try:
            wait = float(env.get("FLEETWRIGHT_REBOOT_WAIT_SECONDS", DEFAULT_REBOOT_WAIT_SECONDS))
        except ValueError:
            raise SettingsError("FLEETWRIGHT_REBOOT_WAIT_SECONDS must be a number of seconds") from None
        return cls(
            resource_id=ResourceId.parse(raw_id) if raw_id is not None else None,
            state_root=env.get("SKYHOOK_ROOT_DIR") or DEFAULT_STATE_ROOT,
            log_root=env.get("SKYHOOK_LOG_DIR") or DEFAULT_LOG_ROOT,
            write_logs=_bool(env, "SKYHOOK_AGENT_WRITE_LOGS", True),
            always_run_step=_bool(env, "OVERLAY_ALWAYS_RUN_STEP", False),
            copy_resolv_requested=_bool(env, "COPY_RESOLV", False),
            data_dir=env.get("SKYHOOK_DATA_DIR") or DEFAULT_DATA_DIR,
            reboot_wait_seconds=wait,
            preflight=_bool(env, "FLEETWRIGHT_PREFLIGHT", False),
        )


@dataclass(frozen=True)
class HostPaths:
    """Host paths seen through the root mount. ``host(p)`` maps a host-absolute path under it."""

    root: str
    copy_dir: str
    settings: Settings

    def host(self, host_path: str) -> str:
        return os.path.join(self.root, host_path.lstrip("/"))

    @property
    def package_dir(self) -> str:
        return self.host(self.copy_dir)

    @property
    def state(self) -> str:
        return self.host(self.settings.state_root)

    @property
    def flags(self) -> str:
        return os.path.join(self.state, "flags")

    @property
    def logs(self) -> str:
        return self.host(self.settings.log_root)

    def step_flags(self, package: str, version: str) -> str:
        return os.path.join(self.flags, package, version)

    def history_file(self, package: str) -> str:
        return os.path.join(self.state, "history", f"{package}.json")

    def interrupt_flags(self, resource_id: str) -> str:
        return os.path.join(self.state, "interrupts", "flags", resource_id)

    def boot_id_file(self) -> str:
        return self.host(BOOT_ID_PATH)
