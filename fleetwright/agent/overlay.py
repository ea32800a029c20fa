"""Merges the package's ``root_dir/`` onto the host root (docs/package-format.md §8 step 6).

It owns the overlay copy. The copy runs in a forked child that chroots into the host root, so
absolute symlinks on the host (``/etc/alternatives/...``) resolve to host paths, never to the
agent container's. Existing directories keep their owner and mode; files are overwritten with the
package's mode bits and timestamps, as the reference does.
"""

from __future__ import annotations

import os
import shutil
import sys

from fleetwright.agent import logs


class OverlayError(Exception):
    pass


def _merge(source: str, target: str) -> int:
    copied = 0
    for dirpath, dirnames, filenames in os.walk(source, followlinks=True):
        rel = os.path.relpath(dirpath, source)
        dest_dir = os.path.normpath(os.path.join(target, rel))
        for name in dirnames:
            dest = os.path.join(dest_dir, name)
            if not os.path.isdir(dest):
                os.makedirs(dest, exist_ok=True)
                shutil.copymode(os.path.join(dirpath, name), dest)
        for name in filenames:
            shutil.copy2(os.path.join(dirpath, name), os.path.join(dest_dir, name))
            copied += 1
    return copied


def apply(root: str, copy_dir: str) -> int:
    """Overlay ``<copyDir>/root_dir`` onto ``/`` of ``root``; return how many files were copied."""
    source = os.path.join(copy_dir, "root_dir")
    if not os.path.isdir(os.path.join(root, source.lstrip("/"))):
        return 0
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: chroot, copy, report the count or the error through the pipe
        os.close(read_end)
        try:
            os.chroot(root)
            os.chdir("/")
            message, code = str(_merge(source, "/")), 0
        except BaseException as exc:  # everything must reach the parent, never a traceback
            message, code = f"{type(exc).__name__}: {exc}", 1
        os.write(write_end, message.encode("utf-8", errors="replace"))
        os.close(write_end)
        sys.stdout.flush()
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        message = reader.read().decode("utf-8", errors="replace")
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OverlayError(f"root_dir overlay failed: {message}")
    logs.say(f"root_dir overlay: {message} file(s) merged onto the host root")
    return int(message)
