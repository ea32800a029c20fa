#!/bin/bash
# Installs kdump-tools when it is missing (the host's package manager, so the host's repository).
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
debian_only
if command -v kdump-config >/dev/null; then echo "kdump: kdump-tools already installed"; exit 0; fi
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends kdump-tools \
  || fail "apt-get could not install kdump-tools"
