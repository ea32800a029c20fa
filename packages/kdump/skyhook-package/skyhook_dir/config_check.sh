#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
grep -qx "USE_KDUMP=1" "$DEFAULTS" 2>/dev/null || fail "USE_KDUMP=1 is not set in $DEFAULTS"
grep -qx "KDUMP_COREDIR=$COREDIR" "$DEFAULTS" || fail "KDUMP_COREDIR is not $COREDIR"
grep -qF "crashkernel=${CRASHKERNEL}\"" "$GRUB_FILE" 2>/dev/null || fail "crashkernel=${CRASHKERNEL} is not in $GRUB_FILE"
