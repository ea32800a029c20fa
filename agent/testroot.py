# The fake host tools below are shell scripts kept verbatim; wrapping them would hurt more than
# long lines do.
# ruff: noqa: E501
"""Throwaway root filesystems that stand in for a node's host root in package tests.

It owns building a small root from Debian's ``bash-static`` (the shell) and ``busybox-static``
(the utilities; only harmless applets are linked), and
the *fake host tools* that live only inside that root: ``sysctl``, ``modprobe``, ``systemctl``,
``update-grub``, ``reboot``, ``mount``, ``apt-get``, ``dnf``, ``grubby`` ... They record every call
and keep "kernel" state in plain files of the root (``/proc/sys``, ``/proc/modules``,
``/proc/cmdline``, ``/proc/mounts``), so a package's real scripts can run in a chroot and tests can
check the host state they leave. ``simulate_reboot`` plays the part of the kernel and init.

It must never be used against a real host, and it never touches anything outside its root: the
dangerous busybox applets (reboot, mount, modprobe, kill, ...) are deliberately not linked, and the
shell is bash, not busybox ash, because Debian's ash runs its built-in applets *before* searching
PATH, which would bypass the fakes and call the real ``reboot(2)``. As a second guard, the agent
runs in fresh PID, mount, UTS and IPC namespaces whenever ``unshare`` allows it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")
BASH_CANDIDATES = ("/bin/bash-static", "/usr/bin/bash-static")
SANDBOX = ("unshare", "--pid", "--fork", "--kill-child", "--mount", "--uts", "--ipc", "--")
# No "sh"/"ash": the shell is bash-static (see the module docstring).
SAFE_APPLETS = (  # noqa: SIM905 - a word list reads better than 90 quoted strings
    "[ [[ awk base64 basename bunzip2 bzcat cat chgrp chmod chown cmp cp cpio cut date dd diff "
    "dirname du echo egrep env expand expr false fgrep find fold getopt grep gunzip gzip head hexdump "
    "id ln ls md5sum mkdir mkfifo mktemp more mv nl nproc od paste printf pwd readlink realpath rev rm "
    "rmdir sed seq sha1sum sha256sum sha512sum sleep sort stat strings tac tail tar tee test timeout "
    "touch tr true truncate uniq unlink unxz unzip wc wget which whoami xargs xxd xz xzcat yes zcat"
).split()
CLEAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CALL_LOG = "/var/log/fake-host/calls"
FAKE_STATE = "/var/lib/fake-host"
DEFAULT_KERNEL = "6.1.0-28-amd64"
DEFAULT_SYSCTLS = {
    "kernel.pid_max": "4194304",
    "kernel.panic": "0",
    "kernel.numa_balancing": "1",
    "kernel.core_pattern": "core",
    "fs.file-max": "9223372036854775807",
    "fs.inotify.max_user_watches": "8192",
    "fs.inotify.max_user_instances": "128",
    "vm.swappiness": "60",
    "vm.max_map_count": "65530",
    "vm.overcommit_memory": "0",
    "net.core.somaxconn": "4096",
    "net.core.rmem_max": "212992",
    "net.core.wmem_max": "212992",
    "net.ipv4.ip_forward": "0",
    "net.ipv4.tcp_mtu_probing": "0",
}
BASE_MODULES = ("ext4", "overlay", "br_netfilter", "nf_conntrack", "tipc")
OS_RELEASES = {
    "debian": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n',
    "cos": 'NAME="Container-Optimized OS"\nID=cos\nVERSION_ID=113\nBUILD_ID=18244.85.49\n',
    "al2023": 'NAME="Amazon Linux"\nID="amzn"\nVERSION_ID="2023"\nPLATFORM_ID="platform:al2023"\n',
}


class TestRootError(Exception):
    """The throwaway root cannot be built (for example busybox-static is not installed)."""


_LOG = f'mkdir -p /var/log/fake-host; echo "$(basename "$0") $*" >> {CALL_LOG}'

FAKES: dict[str, str] = {
    "/usr/sbin/sysctl": f"""#!/bin/sh
{_LOG}
quiet=; nflag=; rc=0
keyfile() {{ echo "/proc/sys/$(echo "$1" | tr . /)"; }}
set_kv() {{
  k=$(echo "${{1%%=*}}" | tr -d ' \\t'); v=$(echo "${{1#*=}}" | sed 's/^[ \\t]*//;s/[ \\t]*$//')
  p=$(keyfile "$k")
  if [ ! -f "$p" ]; then echo "sysctl: cannot stat $p: No such file or directory" >&2; return 1; fi
  echo "$v" > "$p"; [ -n "$quiet" ] || echo "$k = $v"
}}
load_file() {{
  [ -f "$1" ] || {{ echo "sysctl: cannot open \\"$1\\": No such file or directory" >&2; return 1; }}
  r=0
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in ''|'#'*|';'*) continue;; esac
    case "$line" in *=*) set_kv "$line" || r=1;; esac
  done < "$1"
  return $r
}}
while [ $# -gt 0 ]; do
  case "$1" in
    -w|-e) ;;
    -q) quiet=1;;
    -n) nflag=1;;
    -p|--load) if [ $# -gt 1 ] && [ "${{2#-}}" = "$2" ]; then load_file "$2" || rc=1; shift;
               else load_file /etc/sysctl.conf || rc=1; fi;;
    --system) for f in /etc/sysctl.d/*.conf /etc/sysctl.conf; do
                [ -f "$f" ] && {{ load_file "$f" || rc=1; }}; done;;
    *=*) set_kv "$1" || rc=1;;
    *) p=$(keyfile "$1")
       if [ -f "$p" ]; then v=$(cat "$p"); if [ -n "$nflag" ]; then echo "$v"; else echo "$1 = $v"; fi
       else echo "sysctl: cannot stat $p: No such file or directory" >&2; rc=255; fi;;
  esac
  shift
done
exit $rc
""",
    "/usr/sbin/modprobe": f"""#!/bin/sh
{_LOG}
remove=; mods=; rc=0
for a in "$@"; do case "$a" in -r|--remove) remove=1;; -*) ;; *) mods="$mods $a";; esac; done
for m in $mods; do
  if [ -n "$remove" ]; then
    grep -q "^$m " /proc/modules || continue
    if [ -e {FAKE_STATE}/busy-modules/$m ]; then echo "modprobe: FATAL: Module $m is in use." >&2; rc=1; continue; fi
    grep -v "^$m " /proc/modules > /proc/modules.new; mv /proc/modules.new /proc/modules
  else
    inst=$(cat /etc/modprobe.d/*.conf 2>/dev/null | awk -v m="$m" '$1=="install" && $2==m {{$1="";$2="";sub(/^ +/,"");print;exit}}')
    if [ -n "$inst" ]; then
      sh -c "$inst" || {{ echo "modprobe: ERROR: could not insert '$m': Operation not permitted" >&2; rc=1; }}
      continue
    fi
    grep -q "^$m " /proc/modules || echo "$m 16384 0 - Live 0x0000000000000000" >> /proc/modules
  fi
done
exit $rc
""",
    "/usr/sbin/rmmod": f"""#!/bin/sh
{_LOG}
rc=0
for m in "$@"; do
  case "$m" in -*) continue;; esac
  if ! grep -q "^$m " /proc/modules; then echo "rmmod: ERROR: Module $m is not currently loaded" >&2; rc=1; continue; fi
  if [ -e {FAKE_STATE}/busy-modules/$m ]; then echo "rmmod: ERROR: Module $m is in use" >&2; rc=1; continue; fi
  grep -v "^$m " /proc/modules > /proc/modules.new; mv /proc/modules.new /proc/modules
done
exit $rc
""",
    "/usr/sbin/lsmod": f"""#!/bin/sh
{_LOG}
echo "Module                  Size  Used by"
awk '{{printf "%-24s%6s  %s\\n", $1, $2, $3}}' /proc/modules
""",
    "/usr/bin/systemctl": f"""#!/bin/sh
{_LOG}
S=/run/fake-systemd; mkdir -p $S
unit() {{ case "$1" in *.*) echo "$1";; *) echo "$1.service";; esac; }}
cmd=; prop=; value=; now=; units=
while [ $# -gt 0 ]; do
  case "$1" in
    -p|--property) prop=$2; shift;;
    --property=*) prop=${{1#--property=}};;
    --value) value=1;;
    --now) now=1;;
    -q|--quiet|--no-block|--no-pager) ;;
    -*) ;;
    *) if [ -z "$cmd" ]; then cmd=$1; else units="$units $(unit "$1")"; fi;;
  esac
  shift
done
case "$cmd" in
  daemon-reload)
    echo x >> $S/daemon-reloads
    rm -f $S/*.props
    for d in /etc/systemd/system/*.d; do
      [ -d "$d" ] || continue
      u=$(basename "$d" .d)
      for f in "$d"/*.conf; do if [ -f "$f" ]; then grep '^[A-Za-z]*=' "$f" >> "$S/$u.props" || true; fi; done
    done;;
  start|restart|reload|try-restart|reload-or-restart)
    for u in $units; do
      if [ -e {FAKE_STATE}/failing-units/$u ]; then echo "Job for $u failed." >&2; echo failed > $S/$u.state; exit 1; fi
      echo active > $S/$u.state; echo x >> $S/$u.restarts
    done;;
  stop) for u in $units; do echo inactive > $S/$u.state; done;;
  enable|disable)
    W=/etc/systemd/system/multi-user.target.wants; mkdir -p $W
    for u in $units; do
      if [ "$cmd" = enable ]; then touch $W/$u; [ -n "$now" ] && echo active > $S/$u.state
      else rm -f $W/$u; [ -n "$now" ] && echo inactive > $S/$u.state; fi
    done;;
  is-active)
    rc=0; for u in $units; do st=$(cat $S/$u.state 2>/dev/null || echo inactive); echo "$st"; [ "$st" = active ] || rc=3; done; exit $rc;;
  is-enabled)
    rc=0; for u in $units; do if [ -e /etc/systemd/system/multi-user.target.wants/$u ]; then echo enabled; else echo disabled; rc=1; fi; done; exit $rc;;
  show)
    for u in $units; do
      v=$(grep "^$prop=" $S/$u.props 2>/dev/null | tail -n 1 | cut -d= -f2-)
      if [ -n "$value" ]; then echo "$v"; else echo "$prop=$v"; fi
    done;;
  *) echo "systemctl (fake): unsupported command '$cmd'" >&2; exit 1;;
esac
exit 0
""",
    "/usr/sbin/service": f"""#!/bin/sh
{_LOG}
if [ "$1" = procps ]; then exec /usr/sbin/sysctl -q --system; fi
exec /usr/bin/systemctl "$2" "$1"
""",
    "/usr/sbin/update-grub": f"""#!/bin/sh
{_LOG}
[ -f /etc/default/grub ] || {{ echo "update-grub: /etc/default/grub: No such file" >&2; exit 1; }}
cmd=$( . /etc/default/grub; for f in /etc/default/grub.d/*.cfg; do [ -f "$f" ] && . "$f"; done
       echo $GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX_DEFAULT )
mkdir -p /boot/grub
printf 'menuentry "Linux" {{\\n  linux /boot/vmlinuz-%s root=/dev/sda1 ro %s\\n}}\\n' "$(cat /proc/sys/kernel/osrelease)" "$cmd" > /boot/grub/grub.cfg
echo "Generating grub configuration file ... done" >&2
""",
    "/usr/sbin/reboot": f"""#!/bin/sh
{_LOG}
mode=$(cat {FAKE_STATE}/reboot-mode 2>/dev/null || echo queue)
mkdir -p {FAKE_STATE}
case "$mode" in
  queue) echo x >> {FAKE_STATE}/reboot-requested; echo "reboot scheduled";;
  sigterm) echo x >> {FAKE_STATE}/reboot-requested; kill -TERM $$; sleep 5;;
  *) echo "reboot: Failed to connect to bus" >&2; exit 1;;
esac
""",
    "/bin/mount": f"""#!/bin/sh
{_LOG}
all=; set -- $(for a in "$@"; do case "$a" in -a) echo __ALL__;; -o|--bind|-B|bind|rbind|--rbind|-*) ;; *) echo "$a";; esac; done)
bind() {{
  [ -e "$1" ] || {{ echo "mount: $1: special device does not exist." >&2; return 32; }}
  [ -e "$2" ] || {{ echo "mount: $2: mount point does not exist." >&2; return 32; }}
  awk -v t="$2" '$2==t {{f=1}} END {{exit !f}}' /proc/mounts || echo "$1 $2 none rw,bind 0 0" >> /proc/mounts
}}
if [ "$1" = __ALL__ ]; then
  rc=0; while read -r s d t o rest; do case "$s" in '#'*|'') continue;; esac
    case "$o" in *bind*) bind "$s" "$d" || rc=$?;; esac; done < /etc/fstab; exit $rc
fi
[ $# -eq 2 ] || {{ echo "mount (fake): expected SOURCE TARGET" >&2; exit 1; }}
bind "$1" "$2"
""",
    "/bin/umount": f"""#!/bin/sh
{_LOG}
for t in "$@"; do
  case "$t" in -*) continue;; esac
  awk -v t="$t" '$2==t {{f=1}} END {{exit !f}}' /proc/mounts || {{ echo "umount: $t: not mounted." >&2; exit 32; }}
  awk -v t="$t" '$2!=t' /proc/mounts > /proc/mounts.new; mv /proc/mounts.new /proc/mounts
done
""",
    "/bin/mountpoint": """#!/bin/sh
q=; [ "$1" = -q ] && { q=1; shift; }
if awk -v t="$1" '$2==t {f=1} END {exit !f}' /proc/mounts; then [ -n "$q" ] || echo "$1 is a mountpoint"; exit 0; fi
[ -n "$q" ] || echo "$1 is not a mountpoint"; exit 32
""",
    "/bin/uname": """#!/bin/sh
case "$1" in -r) cat /proc/sys/kernel/osrelease;; *) exec /bin/busybox uname "$@";; esac
""",
    "/usr/bin/apt-get": f"""#!/bin/sh
{_LOG}
[ -e {FAKE_STATE}/offline ] && {{ echo "E: Temporary failure resolving 'deb.debian.org'" >&2; exit 100; }}
cmd=; pkgs=
for a in "$@"; do case "$a" in -*) ;; *) if [ -z "$cmd" ]; then cmd=$a; else pkgs="$pkgs $a"; fi;; esac; done
mkdir -p {FAKE_STATE}/dpkg
for p in $pkgs; do
  case "$cmd" in
    install) touch {FAKE_STATE}/dpkg/$p; [ -d /usr/lib/fake-host/payload/$p ] && cp -a /usr/lib/fake-host/payload/$p/. /;;
    remove|purge) rm -f {FAKE_STATE}/dpkg/$p;;
  esac
done
exit 0
""",
    "/usr/bin/dpkg": f"""#!/bin/sh
{_LOG}
[ "$1" = -s ] || exit 0
[ -e {FAKE_STATE}/dpkg/$2 ] && {{ echo "Package: $2"; echo "Status: install ok installed"; exit 0; }}
echo "dpkg-query: package '$2' is not installed" >&2; exit 1
""",
    "/usr/bin/dnf": f"""#!/bin/sh
{_LOG}
[ -e {FAKE_STATE}/offline ] && {{ echo "Error: Failed to download metadata for repo 'amazonlinux'" >&2; exit 1; }}
args=; for a in "$@"; do case "$a" in -*) ;; *) args="$args $a";; esac; done
set -- $args
mkdir -p {FAKE_STATE}/rpm /etc/dnf/plugins; touch /etc/dnf/plugins/versionlock.list
case "$1" in
  install) shift; for p in "$@"; do
      [ -e {FAKE_STATE}/repo-missing/$p ] && {{ echo "Error: Unable to find a match: $p" >&2; exit 1; }}
      touch {FAKE_STATE}/rpm/$p
      case "$p" in kernel-[0-9]*) mkdir -p /boot; touch "/boot/vmlinuz-${{p#kernel-}}";; esac
      [ -d /usr/lib/fake-host/payload/$p ] && cp -a /usr/lib/fake-host/payload/$p/. /
    done;;
  remove) shift; for p in "$@"; do rm -f {FAKE_STATE}/rpm/$p; done;;
  versionlock) case "$2" in
      add) shift 2; for p in "$@"; do grep -qx "$p" /etc/dnf/plugins/versionlock.list || echo "$p" >> /etc/dnf/plugins/versionlock.list; done;;
      delete) shift 2; for p in "$@"; do grep -vx "$p" /etc/dnf/plugins/versionlock.list > /tmp/vl; mv /tmp/vl /etc/dnf/plugins/versionlock.list; done;;
      list|*) cat /etc/dnf/plugins/versionlock.list;;
    esac;;
esac
exit 0
""",
    "/usr/bin/rpm": f"""#!/bin/sh
{_LOG}
[ "$1" = -q ] || exit 0
[ -e {FAKE_STATE}/rpm/$2 ] && {{ echo "$2"; exit 0; }}
echo "package $2 is not installed"; exit 1
""",
    "/usr/sbin/grubby": f"""#!/bin/sh
{_LOG}
mkdir -p {FAKE_STATE}
case "$1" in
  --set-default) [ -f "$2" ] || {{ echo "grubby: The param $2 is incorrect" >&2; exit 1; }}; echo "$2" > {FAKE_STATE}/grubby-default;;
  --set-default=*) f=${{1#--set-default=}}; [ -f "$f" ] || {{ echo "grubby: The param $f is incorrect" >&2; exit 1; }}; echo "$f" > {FAKE_STATE}/grubby-default;;
  --default-kernel) cat {FAKE_STATE}/grubby-default 2>/dev/null || echo "/boot/vmlinuz-$(cat /proc/sys/kernel/osrelease)";;
  *) echo "grubby (fake): unsupported $1" >&2; exit 1;;
esac
""",
    # Installed by "apt-get install kdump-tools" (the fake package payload), not present before.
    "/usr/lib/fake-host/payload/kdump-tools/usr/sbin/kdump-config": f"""#!/bin/sh
{_LOG}
. /etc/default/kdump-tools 2>/dev/null
case "$1" in
  load)
    [ "$USE_KDUMP" = 1 ] || {{ echo "kdump-config: USE_KDUMP is not 1" >&2; exit 1; }}
    grep -q 'crashkernel=' /proc/cmdline || {{ echo "kdump-config: no crashkernel= parameter in the kernel cmdline" >&2; exit 1; }}
    echo 1 > /sys/kernel/kexec_crash_loaded;;
  unload) echo 0 > /sys/kernel/kexec_crash_loaded;;
  show|status) echo "USE_KDUMP: $USE_KDUMP"; echo "KDUMP_COREDIR: $KDUMP_COREDIR"
    [ "$(cat /sys/kernel/kexec_crash_loaded)" = 1 ] && echo "current state: ready to kdump" || {{ echo "current state: Not ready to kdump"; exit 1; }};;
esac
""",
}


def _find(candidates: tuple[str, ...], package: str) -> str:
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    raise TestRootError(
        f"{package} is required to build a test root filesystem: "
        f"install it with `apt-get install {package}` (Debian/Ubuntu)"
    )


def find_busybox() -> str:
    return _find(BUSYBOX_CANDIDATES, "busybox-static")


def find_bash() -> str:
    return _find(BASH_CANDIDATES, "bash-static")


_sandbox_ok: bool | None = None


def sandbox_prefix() -> list[str]:
    """``unshare`` arguments for fresh PID/mount/UTS/IPC namespaces, or [] where that is refused."""
    global _sandbox_ok  # noqa: PLW0603 - probe once per process
    if _sandbox_ok is None:
        try:
            probe = subprocess.run([*SANDBOX, "true"], capture_output=True, check=False, timeout=30)
            _sandbox_ok = probe.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _sandbox_ok = False
    return list(SANDBOX) if _sandbox_ok else []


@dataclass(frozen=True)
class AgentRun:
    returncode: int
    output: str


class TestRoot:
    """A built throwaway root. Paths given to its helpers are host-absolute (``/etc/fstab``)."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, path: str) -> None:
        self.path = path

    def host(self, path: str) -> str:
        return os.path.join(self.path, path.lstrip("/"))

    def exists(self, path: str) -> bool:
        return os.path.lexists(self.host(path))

    def read(self, path: str) -> str:
        with open(self.host(path), encoding="utf-8") as handle:
            return handle.read()

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        target = self.host(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(target, mode)

    def calls(self) -> list[str]:
        return self.read(CALL_LOG).splitlines() if self.exists(CALL_LOG) else []

    def boot_id(self) -> str:
        return self.read("/proc/sys/kernel/random/boot_id").strip()

    def sysctl(self, key: str) -> str:
        return self.read("/proc/sys/" + key.replace(".", "/")).strip()

    def set_sysctl(self, key: str, value: str) -> None:
        self.write("/proc/sys/" + key.replace(".", "/"), value + "\n")

    def modules(self) -> list[str]:
        return [line.split()[0] for line in self.read("/proc/modules").splitlines() if line.strip()]

    def load_module(self, name: str, *, busy: bool = False) -> None:
        if name not in self.modules():
            with open(self.host("/proc/modules"), "a", encoding="utf-8") as handle:
                handle.write(f"{name} 16384 {int(busy)} - Live 0x0000000000000000\n")
        if busy:
            self.write(f"{FAKE_STATE}/busy-modules/{name}", "")

    def mounts(self) -> list[tuple[str, str]]:
        return [(f[0], f[1]) for f in (line.split() for line in self.read("/proc/mounts").splitlines()) if f]

    def unit_state(self, unit: str) -> str:
        path = f"/run/fake-systemd/{unit}.state"
        return self.read(path).strip() if self.exists(path) else "inactive"

    def fake_state(self, name: str, text: str = "") -> None:
        """Set a knob of the fake host, e.g. ``reboot-mode`` or ``offline``."""
        self.write(f"{FAKE_STATE}/{name}", text)

    def cmdline(self) -> str:
        return self.read("/proc/cmdline").strip()

    # -- packages and the agent ---------------------------------------------------------------

    def install_payload(
        self, payload: str, copy_dir: str, configmaps: Mapping[str, str] | None = None
    ) -> str:
        """Copy a package payload (``.../skyhook-package``) to ``copy_dir`` as the copy container does."""
        target = self.host(copy_dir)
        os.makedirs(target, exist_ok=True)
        for name in os.listdir(payload):
            if name.startswith("."):  # the copy container's shell glob skips top-level dot-files
                continue
            source = os.path.join(payload, name)
            if os.path.isdir(source):
                shutil.copytree(source, os.path.join(target, name), dirs_exist_ok=True, symlinks=True)
            else:
                shutil.copy2(source, os.path.join(target, name))
        for key, text in (configmaps or {}).items():
            self.write(f"{copy_dir}/configmaps/{key}", text)
        return target

    def agent_env(self, package: str, version: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {
            "PATH": CLEAN_PATH,
            "SKYHOOK_RESOURCE_ID": f"test-0000-1_{package}_{version}",
            "SKYHOOK_ROOT_DIR": "/var/lib/skyhook/test",
            "SKYHOOK_LOG_DIR": "/var/log/skyhook/test",
            "SKYHOOK_NODE_ORDER": "0",
            "COPY_RESOLV": "false",
            "FLEETWRIGHT_REBOOT_WAIT_SECONDS": "0.2",
        }
        env.update(extra or {})
        return env

    def run_agent(self, args: list[str], env: Mapping[str, str], *, timeout: float = 120) -> AgentRun:
        """Run ``python -m fleetwright.agent`` with ``args`` (the root mount argument included)."""
        proc = subprocess.run(
            [*sandbox_prefix(), sys.executable, "-m", "fleetwright.agent", *args],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return AgentRun(proc.returncode, proc.stdout + proc.stderr)

    # -- the kernel and init ------------------------------------------------------------------

    def simulate_reboot(self) -> str:
        """Boot again: new boot id, cmdline and kernel from the boot loader, sysctl.d applied,
        modules from modules-load.d (minus blacklisted), fstab bind mounts, enabled units active."""
        new_id = str(uuid.uuid4())
        self.write("/proc/sys/kernel/random/boot_id", new_id + "\n")
        self._boot_kernel()
        self._boot_sysctl()
        self._boot_modules()
        self._boot_mounts()
        self._boot_units()
        return new_id

    def _boot_kernel(self) -> None:
        grubby = f"{FAKE_STATE}/grubby-default"
        if self.exists(grubby):
            image = self.read(grubby).strip()
            self.write("/proc/sys/kernel/osrelease", image.removeprefix("/boot/vmlinuz-") + "\n")
        kernel = self.read("/proc/sys/kernel/osrelease").strip()
        args = "root=/dev/sda1 ro quiet"
        if self.exists("/boot/grub/grub.cfg"):
            match = re.search(r"^\s*linux\s+\S+\s+(.*)$", self.read("/boot/grub/grub.cfg"), re.MULTILINE)
            args = " ".join(match.group(1).split()) if match else args
        self.write("/proc/cmdline", f"BOOT_IMAGE=/boot/vmlinuz-{kernel} {args}\n")
        loaded = "0"
        if "crashkernel=" in args and self.exists("/etc/default/kdump-tools"):
            loaded = "1" if re.search(r"^USE_KDUMP=1", self.read("/etc/default/kdump-tools"), re.M) else "0"
        self.write("/sys/kernel/kexec_crash_loaded", loaded + "\n")

    def _boot_sysctl(self) -> None:
        for key, value in DEFAULT_SYSCTLS.items():
            self.set_sysctl(key, value)
        files = [*_glob(self.host("/etc/sysctl.d"), ".conf"), self.host("/etc/sysctl.conf")]
        for path in files:
            if not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    if "=" in line and not line.lstrip().startswith(("#", ";")):
                        key, value = (part.strip() for part in line.split("=", 1))
                        if self.exists("/proc/sys/" + key.replace(".", "/")):
                            self.set_sysctl(key, value)

    def _boot_modules(self) -> None:
        blocked: set[str] = set()
        for path in _glob(self.host("/etc/modprobe.d"), ".conf"):
            with open(path, encoding="utf-8") as handle:
                for fields in (line.split() for line in handle):
                    if len(fields) >= 2 and fields[0] in ("blacklist", "install"):
                        blocked.add(fields[1])
        wanted = list(BASE_MODULES)
        for path in _glob(self.host("/etc/modules-load.d"), ".conf"):
            with open(path, encoding="utf-8") as handle:
                wanted += [line.strip() for line in handle if line.strip() and not line.startswith("#")]
        lines = [
            f"{m} 16384 0 - Live 0x0000000000000000\n" for m in dict.fromkeys(wanted) if m not in blocked
        ]
        self.write("/proc/modules", "".join(lines))
        shutil.rmtree(self.host(f"{FAKE_STATE}/busy-modules"), ignore_errors=True)

    def _boot_mounts(self) -> None:
        mounts = ["/dev/sda1 / ext4 rw,relatime 0 0\n"]
        if self.exists("/etc/fstab"):
            for fields in (line.split() for line in self.read("/etc/fstab").splitlines()):
                if len(fields) >= 4 and not fields[0].startswith("#") and "bind" in fields[3]:
                    mounts.append(f"{fields[0]} {fields[1]} none rw,bind 0 0\n")
        self.write("/proc/mounts", "".join(mounts))

    def _boot_units(self) -> None:
        shutil.rmtree(self.host("/run"), ignore_errors=True)
        os.makedirs(self.host("/run/fake-systemd"))
        wants = self.host("/etc/systemd/system/multi-user.target.wants")
        for unit in os.listdir(wants) if os.path.isdir(wants) else []:
            self.write(f"/run/fake-systemd/{unit}.state", "active\n")
        for dropins in _glob(self.host("/etc/systemd/system"), ".d"):
            unit = os.path.basename(dropins)[: -len(".d")]
            props = []
            for conf in sorted(_glob(dropins, ".conf")):
                with open(conf, encoding="utf-8") as handle:
                    props += [line for line in handle if re.match(r"^[A-Za-z]+=", line)]
            self.write(f"/run/fake-systemd/{unit}.props", "".join(props))


def _glob(directory: str, suffix: str) -> list[str]:
    if not os.path.isdir(directory):
        return []
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(suffix))


def _device(root: str, name: str, major: int, minor: int) -> None:
    path = os.path.join(root, "dev", name)
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        os.chmod(path, 0o666)  # noqa: S103 - /dev/null is world-writable on every host
    except OSError:
        # Without CAP_MKNOD a plain file still lets scripts redirect to /dev/null.
        with open(path, "w", encoding="utf-8"):
            pass


def _install_tools(root: str, busybox: str, bash: str) -> None:
    for directory in ("bin", "sbin", "usr/bin", "usr/sbin", "usr/local/bin", "usr/local/sbin"):
        os.makedirs(os.path.join(root, directory), exist_ok=True)
    shutil.copy2(bash, os.path.join(root, "bin", "bash"))
    os.symlink("bash", os.path.join(root, "bin", "sh"))
    shutil.copy2(busybox, os.path.join(root, "bin", "busybox"))
    for applet in SAFE_APPLETS:
        os.symlink("busybox", os.path.join(root, "bin", applet))
    os.symlink("../../bin/env", os.path.join(root, "usr", "bin", "env"))


def _install_fakes(tr: TestRoot) -> None:
    for path, text in FAKES.items():
        tr.write(path, text, 0o755)


def _seed_host(tr: TestRoot, os_release: str, kernel: str) -> None:
    for directory in ("tmp", "var/tmp"):
        os.makedirs(tr.host(directory), exist_ok=True)
        os.chmod(tr.host(directory), 0o1777)  # noqa: S103 - sticky, world-writable like any /tmp
    os.makedirs(tr.host("/dev"), exist_ok=True)
    for name, major, minor in (("null", 1, 3), ("zero", 1, 5), ("random", 1, 8), ("urandom", 1, 9)):
        _device(tr.path, name, major, minor)
    tr.write("/etc/os-release", OS_RELEASES[os_release])
    tr.write("/etc/passwd", "root:x:0:0:root:/root:/bin/sh\n")
    tr.write("/etc/group", "root:x:0:\n")
    tr.write("/etc/hostname", "test-node\n")
    tr.write("/etc/fstab", "/dev/sda1 / ext4 defaults 0 1\n")
    tr.write("/proc/sys/kernel/random/boot_id", str(uuid.uuid4()) + "\n")
    tr.write("/proc/sys/kernel/osrelease", kernel + "\n")
    tr.write("/proc/cmdline", f"BOOT_IMAGE=/boot/vmlinuz-{kernel} root=/dev/sda1 ro quiet\n")
    tr.write("/proc/mounts", "/dev/sda1 / ext4 rw,relatime 0 0\n")
    tr.write("/proc/modules", "".join(f"{m} 16384 0 - Live 0x0000000000000000\n" for m in BASE_MODULES))
    tr.write("/sys/kernel/kexec_crash_loaded", "0\n")
    tr.write(f"/boot/vmlinuz-{kernel}", "")
    for key, value in DEFAULT_SYSCTLS.items():
        tr.set_sysctl(key, value)
    if os_release == "debian":
        tr.write(
            "/etc/default/grub", 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n'
        )
        tr.write("/etc/pam.d/common-session", "session required pam_unix.so\n")
        tr.write("/etc/pam.d/common-session-noninteractive", "session required pam_unix.so\n")
    os.makedirs(tr.host("/run/fake-systemd"), exist_ok=True)


def build(path: str, *, os_release: str = "debian", kernel: str = DEFAULT_KERNEL) -> TestRoot:
    """Build a root at ``path`` (created if missing). ``os_release``: debian, cos or al2023."""
    if os_release not in OS_RELEASES:
        raise TestRootError(f"os_release must be one of {', '.join(OS_RELEASES)}, got {os_release!r}")
    busybox, bash = find_busybox(), find_bash()
    os.makedirs(path, exist_ok=True)
    tr = TestRoot(path)
    _install_tools(path, busybox, bash)
    _install_fakes(tr)
    _seed_host(tr, os_release, kernel)
    _verify_static(tr)
    return tr


def _verify_static(tr: TestRoot) -> None:
    # A dynamically linked shell or busybox has no libc inside the chroot: fail loudly, naming the fix.
    proc = subprocess.run(
        ["/bin/sh", "-c", "/bin/busybox true"],
        preexec_fn=lambda: os.chroot(tr.path),
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        raise TestRootError(
            "bash-static or busybox-static does not run inside a chroot (dynamically linked?): "
            f"{proc.stderr.decode(errors='replace').strip()}"
        )


def step(
    path: str, *args: str, codes: tuple[int, ...] = (0,), idempotence: bool = True, **extra: object
) -> dict[str, object]:
    """A ``config.json`` step object with the schema's required fields filled in."""
    doc: dict[str, object] = {
        "name": path.replace("/", "_"),
        "path": path,
        "arguments": list(args),
        "returncodes": list(codes),
        "on_host": True,
        "idempotence": idempotence,
        "upgrade_step": False,
    }
    doc.update(extra)
    return doc


def write_package(
    payload: str,
    modes: Mapping[str, list[dict[str, object]]],
    scripts: Mapping[str, str],
    *,
    name: str = "demo",
    version: str = "1.0.0",
    expected_config_files: list[str] | None = None,
    root_dir: Mapping[str, str] | None = None,
) -> str:
    """Write a package payload (``config.json``, ``skyhook_dir/``, ``root_dir/``) under ``payload``."""
    os.makedirs(os.path.join(payload, "skyhook_dir"), exist_ok=True)
    doc = {
        "schema_version": "v1",
        "package_name": name,
        "package_version": version,
        "expected_config_files": expected_config_files or [],
        "modes": dict(modes),
    }
    with open(os.path.join(payload, "config.json"), "w", encoding="utf-8") as handle:
        json.dump(doc, handle, indent=2)
    for rel, text in scripts.items():
        target = os.path.join(payload, "skyhook_dir", rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
    for rel, text in (root_dir or {}).items():
        target = os.path.join(payload, "root_dir", rel.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
    return payload
