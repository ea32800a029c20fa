#!/bin/bash
# After the reboot: the pinned kernel runs, the EFA kernel module is loaded, chronyd is running.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
running="$(uname -r)"
[ "$running" = "$KERNEL" ] || fail "running kernel is $running, expected the pinned $KERNEL (reboot pending?)"
grep -q '^efa ' /proc/modules || fail "the efa kernel module is not loaded"
systemctl is-active --quiet chronyd || fail "chronyd is not running"
