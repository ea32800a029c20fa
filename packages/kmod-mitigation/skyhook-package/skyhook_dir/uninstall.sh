#!/bin/bash
# Lifts the block; nothing is loaded again (the kernel loads modules on demand).
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
rm -f "$CONF"
