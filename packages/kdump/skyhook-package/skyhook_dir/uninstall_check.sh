#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
[ ! -f "$GRUB_FILE" ] || fail "$GRUB_FILE is still present"
if grep -qx "USE_KDUMP=1" "$DEFAULTS" 2>/dev/null; then fail "kdump is still enabled in $DEFAULTS"; fi
