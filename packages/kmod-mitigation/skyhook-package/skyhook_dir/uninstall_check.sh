#!/bin/bash
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
[ ! -e "$CONF" ] || fail "$CONF is still present"
