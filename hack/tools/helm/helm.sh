#!/usr/bin/env bash
# Builds the helm that `make chart-test`, `make manifests` and the e2e suite
# run, from the Go module pinned in this directory's go.mod, into the
# version-keyed cache (hack/tools/build.sh).
#
#   hack/tools/helm/helm.sh               build if missing; print the binary's path last on stdout
#   hack/tools/helm/helm.sh --print-path  only print the path (never builds)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The -X flag gives `helm version` the real version instead of "v4.3"; it only
# changes the link, not the compile.
export EXTRA_LDFLAGS='-X helm.sh/helm/v4/internal/version.version=$version'
# Built as the tests build: 558 of helm's 943 packages are the project's own
# dependencies at the same versions (client-go, apimachinery, api), compiled
# by then (hack/tools/build.sh).
export LIKE_TESTS=1
exec "$here/../build.sh" helm helm.sh/helm/v4 helm.sh/helm/v4/cmd/helm "$@"
