#!/bin/bash
. "$STEP_ROOT/lib.sh"
[ ! -e "$CONF" ] || fail "$CONF is still present"
