#!/bin/bash
# Every configured bind mount is in /etc/fstab and mounted right now.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
set +e +o pipefail
bad=0
while read -r src dst _; do
  [ -n "$src" ] || continue
  grep -qxF "$src $dst none bind,nofail 0 0 $TAG" /etc/fstab || { echo "bind-mount: $dst is not in /etc/fstab" >&2; bad=1; }
  mounted "$dst" || { echo "bind-mount: $dst is not mounted" >&2; bad=1; }
done <<< "$(pairs)"
exit "$bad"
