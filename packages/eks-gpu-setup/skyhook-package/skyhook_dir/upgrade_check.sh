#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
grep -qx "${1:?previous} -> ${2:?current}" "/var/lib/fleetwright/${PKG}.upgrades" 2>/dev/null \
  || fail "upgrade from $1 to $2 was not recorded"
