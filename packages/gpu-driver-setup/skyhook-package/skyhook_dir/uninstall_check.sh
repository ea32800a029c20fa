#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"

! installed "$DRIVER" || fail "$DRIVER is still installed"
for f in "$PROFILE_FILE" "$LD_FILE"; do
  [ ! -e "$f" ] || fail "$f is still present"
done
