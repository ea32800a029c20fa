#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"

installed "$DRIVER" || fail "$DRIVER is not installed"
grep -q "$PREFIX/bin" "$PROFILE_FILE" || fail "$PROFILE_FILE does not add $PREFIX/bin"
grep -qx "$PREFIX/lib64" "$LD_FILE" || fail "$LD_FILE does not list $PREFIX/lib64"
systemctl is-enabled --quiet "$UNIT" || fail "$UNIT is not enabled"
