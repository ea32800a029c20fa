//go:build tools

// Package tools pins the training operator command so `go mod tidy` keeps its dependencies.
package tools

import _ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
