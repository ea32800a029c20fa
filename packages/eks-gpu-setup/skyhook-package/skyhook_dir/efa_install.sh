#!/bin/bash
# Downloads the AWS EFA installer tarball, verifies its sha256 (when given) and runs it.
# Agent-tracked (idempotence: false): it runs once per package version.
# shellcheck source=lib.sh
. "$STEP_ROOT/lib.sh"
[ -n "$EFA_URL" ] || fail "configMap key efa_installer_url is empty"
work="$(mktemp -d /var/tmp/efa.XXXXXX)"
trap 'rm -rf "$work"' EXIT
fetch "$EFA_URL" "$work/efa.tar.gz" || fail "cannot download $EFA_URL"
if [ -n "$EFA_SHA256" ]; then
  echo "$EFA_SHA256  $work/efa.tar.gz" | sha256sum -c - >/dev/null \
    || fail "sha256 of $EFA_URL is $(sha256sum "$work/efa.tar.gz" | cut -d' ' -f1), expected $EFA_SHA256"
else
  echo "eks-gpu-setup: WARNING: no efa_installer_sha256 given; the download is not verified" >&2
fi
tar -xzf "$work/efa.tar.gz" -C "$work" || fail "$EFA_URL is not a gzip tarball"
installer=
for candidate in "$work"/*/efa_installer.sh; do
  if [ -f "$candidate" ]; then installer=$candidate; break; fi
done
[ -n "$installer" ] || fail "efa_installer.sh not found in the tarball"
cd "$(dirname "$installer")"
# shellcheck disable=SC2086 # EFA_ARGS is a word list on purpose
./efa_installer.sh $EFA_ARGS || fail "efa_installer.sh failed"
