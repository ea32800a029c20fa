//go:build tools

// Package tools pins the Temporal server and temporal-sql-tool commands so `go mod tidy` keeps
// their dependencies.
package tools

import (
	_ "go.temporal.io/server/cmd/server"
	_ "go.temporal.io/server/cmd/tools/sql"
)
