"""What each ``--os`` flavour of a throwaway root has, as a real host of that distribution would.

Pure data: the os-release, the distribution's own host tools (package manager, boot loader
tools) and their aliases, its configuration files and drop-in directories, and the kernel's
``/proc/sys`` defaults. ``hostroot`` lays a flavour out on disk, ``toolbox`` installs its tools and
``boot`` restores the kernel defaults on reboot. Packages run against these roots must fail on
their own logic, never because the root lacks what every host of that distribution has.

A *real* flavour is a root the distribution's own tools built (``mmdebstrap``, by the image
builder): its package manager installs from the distribution's archive for real, while the host
tools that would act on this machine's kernel, init or mounts stay the recording fakes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_KERNEL = "6.1.0-28-amd64"
# A 6.1 kernel on a large GPU host, as `sysctl -a` shows it (the keys host-tuning packages read
# and write; values are the kernel's defaults).
DEFAULT_SYSCTLS = {
    "kernel.pid_max": "4194304",
    "kernel.threads-max": "2061212",
    "kernel.panic": "0",
    "kernel.panic_on_oops": "0",
    "kernel.numa_balancing": "1",
    "kernel.core_pattern": "core",
    "kernel.sched_autogroup_enabled": "1",
    "kernel.shmmax": "18446744073692774399",
    "kernel.shmall": "18446744073692774399",
    "kernel.shmmni": "4096",
    "kernel.msgmax": "8192",
    "kernel.msgmnb": "16384",
    "kernel.sem": "32000\t1024000000\t500\t32000",
    "kernel.perf_event_paranoid": "2",
    "kernel.unprivileged_bpf_disabled": "2",
    "kernel.kptr_restrict": "0",
    "kernel.dmesg_restrict": "1",
    "fs.file-max": "9223372036854775807",
    "fs.nr_open": "1048576",
    "fs.aio-max-nr": "65536",
    "fs.inotify.max_user_watches": "8192",
    "fs.inotify.max_user_instances": "128",
    "vm.swappiness": "60",
    "vm.max_map_count": "65530",
    "vm.overcommit_memory": "0",
    "vm.min_free_kbytes": "67584",
    "vm.dirty_ratio": "20",
    "vm.dirty_background_ratio": "10",
    "vm.zone_reclaim_mode": "0",
    "vm.nr_hugepages": "0",
    "vm.vfs_cache_pressure": "100",
    "net.core.somaxconn": "4096",
    "net.core.netdev_max_backlog": "1000",
    "net.core.rmem_default": "212992",
    "net.core.rmem_max": "212992",
    "net.core.wmem_default": "212992",
    "net.core.wmem_max": "212992",
    "net.core.optmem_max": "20480",
    "net.ipv4.ip_forward": "0",
    "net.ipv4.ip_local_port_range": "32768\t60999",
    "net.ipv4.tcp_mtu_probing": "0",
    "net.ipv4.tcp_rmem": "4096\t131072\t6291456",
    "net.ipv4.tcp_wmem": "4096\t16384\t4194304",
    "net.ipv4.tcp_timestamps": "1",
    "net.ipv4.tcp_sack": "1",
    "net.ipv4.tcp_congestion_control": "cubic",
    "net.ipv4.tcp_max_syn_backlog": "4096",
    "net.ipv4.neigh.default.gc_thresh1": "128",
    "net.ipv4.neigh.default.gc_thresh2": "512",
    "net.ipv4.neigh.default.gc_thresh3": "1024",
    "net.bridge.bridge-nf-call-iptables": "1",
    "net.netfilter.nf_conntrack_max": "262144",
}
BASE_MODULES = ("ext4", "overlay", "br_netfilter", "nf_conntrack", "tipc")
# A Kubernetes node's units: enabled, so they run again after every simulated reboot.
BASE_UNITS = ("containerd.service", "kubelet.service", "systemd-sysctl.service")
# Drop-in directories every distribution ships (empty on a fresh host).
BASE_DIRECTORIES = (
    "/etc/sysctl.d",
    "/etc/security/limits.d",
    "/etc/profile.d",
    "/etc/ld.so.conf.d",
    "/etc/modprobe.d",
    "/etc/modules-load.d",
    "/etc/systemd/system",
    "/etc/default",
    "/usr/local/lib",
    "/opt",
)
BASE_FILES = {
    "/etc/passwd": "root:x:0:0:root:/root:/bin/bash\n",
    "/etc/group": "root:x:0:\n",
    "/etc/hostname": "test-node\n",
    "/etc/fstab": "/dev/sda1 / ext4 defaults 0 1\n",
    "/etc/sysctl.conf": "# System defaults live in /etc/sysctl.d; see sysctl.d(5).\n",
    "/etc/security/limits.conf": "# See limits.conf(5); drop-ins go to /etc/security/limits.d.\n",
    "/etc/ld.so.conf": "include /etc/ld.so.conf.d/*.conf\n",
    "/etc/profile": (
        'PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"\nexport PATH\n'
        'for i in /etc/profile.d/*.sh; do\n  if [ -r "$i" ]; then . "$i"; fi\ndone\nunset i\n'
    ),
}


@dataclass(frozen=True)
class Flavour:
    """One distribution. ``tools``: fake tools of ``fakes/`` that only this distribution has;
    ``aliases``: extra names for them (a path in the root → the tool it runs)."""

    name: str
    os_release: str
    """Written to ``/etc/os-release`` on a fake root; a real root keeps its own."""
    tools: tuple[str, ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)
    directories: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)
    sysctls: dict[str, str] = field(default_factory=dict)
    real: bool = False
    """Built from the distribution's archive (``hostroot.unpack``), not from fakes alone."""
    own_tools: tuple[str, ...] = ()
    """Fakes a real root does not get: the distribution's own tool is harmless in a chroot and
    the real packages depend on it (``ldconfig`` writes the loader cache they need)."""


DEBIAN_GRUB = 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n'
FLAVOURS = {
    "debian": Flavour(
        name="debian",
        os_release='PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n',
        tools=("/usr/bin/apt-get", "/usr/bin/dpkg", "/usr/sbin/update-grub"),
        aliases={"/usr/bin/apt": "apt-get"},
        directories=("/etc/default/grub.d", "/etc/apt/sources.list.d"),
        files={
            "/etc/default/grub": DEBIAN_GRUB,
            "/etc/pam.d/common-session": "session required pam_unix.so\n",
            "/etc/pam.d/common-session-noninteractive": "session required pam_unix.so\n",
        },
    ),
    "al2023": Flavour(
        name="al2023",
        os_release='NAME="Amazon Linux"\nID="amzn"\nVERSION_ID="2023"\nPLATFORM_ID="platform:al2023"\n',
        tools=("/usr/bin/dnf", "/usr/bin/rpm", "/usr/sbin/grubby"),
        aliases={"/usr/bin/yum": "dnf"},
        directories=("/etc/yum.repos.d", "/etc/dnf/plugins"),
        files={
            "/etc/default/grub": (
                'GRUB_TIMEOUT=0\nGRUB_CMDLINE_LINUX_DEFAULT="console=tty0 nvme_core.io_timeout=4294967295"\n'
            ),
        },
        sysctls={"kernel.core_pattern": "|/usr/lib/systemd/systemd-coredump %P %u %g %s %t %c %h"},
    ),
    # Container-Optimized OS: no package manager and no boot loader configuration to edit.
    "cos": Flavour(
        name="cos",
        os_release='NAME="Container-Optimized OS"\nID=cos\nVERSION_ID=113\nBUILD_ID=18244.85.49\n',
        sysctls={"kernel.core_pattern": "|/sbin/crash_reporter --user=%P:%s:%u:%g:%f"},
    ),
    # Debian 12 as mmdebstrap builds it: apt-get and dpkg install from the archive. The boot
    # loader stays a fake (grub's own update-grub probes this machine's disks).
    "debian-real": Flavour(
        name="debian-real",
        os_release='PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n',
        tools=("/usr/sbin/update-grub",),
        directories=("/etc/default/grub.d",),
        files={"/etc/default/grub": DEBIAN_GRUB},
        real=True,
        own_tools=("/usr/sbin/ldconfig", "/usr/lib/fake-host/payload"),
    ),
}
# Every tool some distribution has and another lacks; the other fakes are on every root.
DISTRIBUTION_TOOLS = frozenset(tool for f in FLAVOURS.values() for tool in f.tools)


def sysctls(flavour: Flavour) -> dict[str, str]:
    """The kernel's ``/proc/sys`` values at boot on ``flavour``."""
    return {**DEFAULT_SYSCTLS, **flavour.sysctls}
