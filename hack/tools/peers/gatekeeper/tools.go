//go:build tools

// Package tools pins Gatekeeper (its manager: webhook, audit and controllers
// in one binary) for `make bench-peers` (issue 28): the same Plan rules as the
// gate, written as a ConstraintTemplate and Constraint in ../policies.
// hack/tools/build.sh builds it into the version-keyed cache; the cold build
// is long (tens of minutes on 2 cores).
package tools

import _ "github.com/open-policy-agent/gatekeeper/v3"
