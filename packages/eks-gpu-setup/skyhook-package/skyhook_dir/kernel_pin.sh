#!/bin/bash
# Installs kernel $kernel_version, locks it against dnf upgrades and makes it the boot default.
# It runs on the next boot: declare a reboot interrupt.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
require_al2023
rpm -q "kernel-${KERNEL}" >/dev/null || dnf install -y "kernel-${KERNEL}" || fail "cannot install kernel-${KERNEL}"
dnf versionlock add "kernel-${KERNEL}"
grubby --set-default "/boot/vmlinuz-${KERNEL}" || fail "grubby cannot select /boot/vmlinuz-${KERNEL}"
echo "eks-gpu-setup: kernel ${KERNEL} pinned; it boots after the reboot interrupt"
