//go:build tools

// Package tools pins helm, which `make chart-test`, `make manifests` and the
// e2e suite (through internal/testenv) run to render the chart. It lives in
// its own module so helm's dependencies never enter the product's go.mod.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
