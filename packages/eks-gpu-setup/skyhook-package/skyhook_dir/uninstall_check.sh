#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
if grep -qx "kernel-${KERNEL}" /etc/dnf/plugins/versionlock.list 2>/dev/null; then fail "kernel-${KERNEL} is still locked"; fi
[ ! -e "$CHRONY_FILE" ] || fail "$CHRONY_FILE is still present"
