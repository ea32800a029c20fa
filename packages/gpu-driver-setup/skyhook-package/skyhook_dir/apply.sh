#!/bin/bash
# Installs the driver package, puts its tools on login shells' PATH and its libraries on the
# loader's path, and enables the persistence daemon (its unit comes with root_dir/). The daemon
# starts at the next boot: pair the package with a reboot interrupt.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"

pm="$(manager)"
"$pm" install -y "$DRIVER" || fail "$pm could not install $DRIVER"
echo "export PATH=\"\$PATH:$PREFIX/bin\"" > "$PROFILE_FILE"
echo "$PREFIX/lib64" > "$LD_FILE"
ldconfig
systemctl daemon-reload
systemctl enable "$UNIT"
log "$DRIVER installed with $pm; $UNIT enabled"
