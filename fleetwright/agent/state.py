"""Host state the agent keeps between runs: idempotence flags, check results and version history.

It owns the on-disk formats of docs/package-format.md §10-§12, byte-compatible with NodeWright so
that nodes that move over keep their state. It must not decide whether a step runs; ``run`` does that.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import shutil
from collections.abc import Sequence

from fleetwright.agent import logs

UNKNOWN_VERSION = "unknown"
UNINSTALLED = "uninstalled"


def flag_marker(arguments: Sequence[str], returncodes: Sequence[int]) -> str:
    """Standard base64 of ``repr(args)_repr(codes)``, as the v6 agent computes it
    (docs/package-format.md §11).

    Arguments are taken before ``env:`` substitution, exactly like the reference.
    """
    raw = f"{list(arguments)!r}_{list(returncodes)!r}"
    return base64.b64encode(raw.encode("utf-8")).decode("ascii")


def flag_path(flag_dir: str, step_path: str, arguments: Sequence[str], returncodes: Sequence[int]) -> str:
    # The marker can contain "/"; like the reference, that nests directories instead of failing.
    return os.path.join(flag_dir, f"{step_path}_{flag_marker(arguments, returncodes)}")


def write_flag(path: str, always_runs: bool) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"{dt.datetime.now(dt.UTC).isoformat()}\n{always_runs}\n")


def clear_flags(flag_dir: str) -> None:
    shutil.rmtree(flag_dir, ignore_errors=True)


def touch(path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8"):
        pass


def write_check_results(flags_dir: str, results: Sequence[tuple[str, bool]]) -> None:
    """One line per check step: ``<path> <failed>``. ``True`` means FAILED (inverted, as in v6)."""
    os.makedirs(flags_dir, exist_ok=True)
    with open(os.path.join(flags_dir, "check_results"), "w", encoding="utf-8") as handle:
        handle.writelines(f"{path} {not passed}\n" for path, passed in results)


def read_history(path: str) -> dict[str, object]:
    """The history document, or an empty one. A corrupt file is kept as ``.backup``
    (docs/package-format.md §12)."""
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
        if not isinstance(doc, dict) or not isinstance(doc.get("history", []), list):
            raise ValueError("not a history object")
        return doc
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        logs.warn(f"history file {path} is unreadable ({exc}); keeping it as {path}.backup")
        os.replace(path, f"{path}.backup")
        return {}


def current_version(path: str) -> str:
    value = read_history(path).get("current-version")
    return value if isinstance(value, str) else UNKNOWN_VERSION


def record_version(path: str, version: str) -> None:
    doc = read_history(path)
    history = doc.get("history")
    entries = list(history) if isinstance(history, list) else []
    entries.insert(0, {"version": version, "time": dt.datetime.now(dt.UTC).isoformat()})
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump({"current-version": version, "history": entries}, handle, indent=2)
    os.replace(tmp, path)  # readers never see a half-written history
