#!/bin/bash
# Points chronyd at the configured servers (Amazon Time Sync by default) and restarts it.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
rpm -q chrony >/dev/null || dnf install -y chrony || fail "cannot install chrony"
mkdir -p /etc/chrony.d
: > "$CHRONY_FILE.tmp"
for server in $CHRONY_SERVERS; do echo "server $server prefer iburst minpoll 4 maxpoll 4" >> "$CHRONY_FILE.tmp"; done
mv "$CHRONY_FILE.tmp" "$CHRONY_FILE"
systemctl enable chronyd
systemctl restart chronyd
