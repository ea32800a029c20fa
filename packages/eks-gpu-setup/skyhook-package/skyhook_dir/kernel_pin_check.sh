#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
rpm -q "kernel-${KERNEL}" >/dev/null || fail "kernel-${KERNEL} is not installed"
[ "$(grubby --default-kernel)" = "/boot/vmlinuz-${KERNEL}" ] || fail "the default boot kernel is not ${KERNEL}"
grep -qx "kernel-${KERNEL}" /etc/dnf/plugins/versionlock.list || fail "kernel-${KERNEL} is not version-locked"
