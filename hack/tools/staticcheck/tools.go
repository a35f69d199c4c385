//go:build tools

// Package tools pins staticcheck for `make lint` (hack/tools/build.sh builds
// it into the version-keyed cache).
package tools

import _ "honnef.co/go/tools/cmd/staticcheck"
