#!/bin/bash
# upgrade_step: the agent passes the previous and the current package version.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
previous="${1:?previous version}"; current="${2:?current version}"
mkdir -p /var/lib/fleetwright
echo "$previous -> $current" >> "/var/lib/fleetwright/${PKG}.upgrades"
echo "eks-gpu-setup: upgraded from $previous to $current (kernel ${KERNEL})"
