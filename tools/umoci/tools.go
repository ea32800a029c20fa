//go:build tools

// Package tools pins umoci so `go mod tidy` keeps its dependencies.
package tools

import _ "github.com/opencontainers/umoci/cmd/umoci"
