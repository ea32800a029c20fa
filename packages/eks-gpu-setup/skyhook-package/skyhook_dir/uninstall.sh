#!/bin/bash
# Unpins the kernel and drops the chrony source. The kernel and EFA software stay installed:
# removing a running kernel or the fabric driver from a live GPU node is not safe to automate.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
dnf versionlock delete "kernel-${KERNEL}"
rm -f "$CHRONY_FILE"
systemctl restart chronyd
