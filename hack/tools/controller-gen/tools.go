//go:build tools

// Package tools pins controller-gen for `make generate` (hack/tools/build.sh
// builds it into the version-keyed cache).
package tools

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"
