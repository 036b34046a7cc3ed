//go:build tools

// Package kubetools pins the commands hack/kube-bin.sh builds, so that `go mod tidy` keeps
// their dependencies in go.mod and go.sum. It is never compiled into anything.
package kubetools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
