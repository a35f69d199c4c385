//go:build tools

// Package tools pins Kyverno's admission controller for `make bench-peers`
// (issue 28): the same Plan rules as the gate, written as a ClusterPolicy in
// ../policies, measured through one kube-apiserver beside the gate.
// hack/tools/build.sh builds it into the version-keyed cache; the cold build
// is long (tens of minutes on 2 cores).
package tools

import _ "github.com/kyverno/kyverno/cmd/kyverno"
