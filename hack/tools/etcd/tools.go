//go:build tools

// Package tools pins etcd for the local control plane. etcd's main package is
// the root of go.etcd.io/etcd/server/v3.
package tools

import _ "go.etcd.io/etcd/server/v3"
