#!/bin/bash
# Check steps use the same dispatcher; a separate file keeps the <step>_check naming convention.
exec "$(dirname "$0")/run.sh" "$@"
