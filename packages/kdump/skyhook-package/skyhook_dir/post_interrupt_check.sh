#!/bin/bash
# Live state after the reboot: the kernel reserved crash memory and a crash kernel is loaded.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
tr ' ' '\n' < /proc/cmdline | grep -qxF "crashkernel=${CRASHKERNEL}" \
  || fail "crashkernel=${CRASHKERNEL} is not on the running kernel's command line (reboot pending?)"
[ "$(cat /sys/kernel/kexec_crash_loaded)" = 1 ] || fail "no crash kernel is loaded (/sys/kernel/kexec_crash_loaded is 0)"
