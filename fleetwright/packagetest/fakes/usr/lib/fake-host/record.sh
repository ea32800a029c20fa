# shellcheck shell=sh
# Sourced by every fake host tool: the directory of the fake host's own knobs and state, and the
# call log that tests read (one line per call: the tool's name and its arguments).
# shellcheck disable=SC2034  # used by the tools that source this file
FAKE_STATE=/var/lib/fake-host
record() {
  mkdir -p /var/log/fake-host
  echo "$(basename "$0") $*" >> /var/log/fake-host/calls
}
