//go:build tools

// Package tools pins github.com/prometheus/prometheus (and prometheus-
// operator's API types) for the chart's alert and dashboard tests in this
// directory (`make alert-tests`), and promtool itself for `make promtool`
// (hack/tools/build.sh builds it into the version-keyed cache), which is
// optional: its cold build is far longer than the tests' own.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
