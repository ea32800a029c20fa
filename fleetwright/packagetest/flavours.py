"""What each ``--os`` flavour of a throwaway root looks like: its os-release and kernel defaults.

Pure data; ``hostroot`` lays it out on disk and ``boot`` restores the kernel defaults on reboot.
"""

from __future__ import annotations

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
FLAVOURS = tuple(OS_RELEASES)
