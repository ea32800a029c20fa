//go:build tools

// Package tools pins the CNI plugins the real test node uses so `go mod tidy` keeps their dependencies.
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
)
