#!/usr/bin/env bash
# Builds the helm that `make chart-test`, `make manifests` and the e2e suite
# run, from the Go module pinned in this directory's go.mod, into a cache
# directory outside the clone keyed by its version (the same approach as
# hack/controlplane.sh). It is built only when missing, so only the first run
# pays for the compile.
#
#   hack/tools/helm/helm.sh               build if missing; print the binary's path last on stdout
#   hack/tools/helm/helm.sh --print-path  only print the path (never builds)
#
# GUG_HELM_DIR overrides the directory; otherwise it is
# ${GUG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-upgrade-gate}/helm/<version>.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

version=$(awk '
	$1 == "require" && $2 == "helm.sh/helm/v4" { print $3; exit }
	$1 == "helm.sh/helm/v4" && $2 ~ /^v/ { print $2; exit }' "$here/go.mod")
[[ -n $version ]] || { echo "helm.sh: $here/go.mod does not require helm.sh/helm/v4" >&2; exit 1; }
cache="${GUG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-upgrade-gate}"
dir="${GUG_HELM_DIR:-$cache/helm/$version}"
bin="$dir/helm"

if [[ ${1:-} == --print-path ]]; then
	echo "$bin"
	exit 0
elif [[ $# -gt 0 ]]; then
	echo "usage: $0 [--print-path]" >&2
	exit 2
fi

if [[ -x $bin ]]; then
	echo "helm $version: already built in $dir" >&2
	echo "$bin"
	exit 0
fi

tmp="" ticker=""
cleanup() {
	[[ -z $ticker ]] || kill "$ticker" 2>/dev/null || true
	[[ -z $tmp ]] || rm -f "$tmp"
}
trap cleanup EXIT

mkdir -p "$dir"
echo "building helm $version from its Go module (first time only: about 2-4 minutes of compile on 2 cores)..." >&2
# A temporary name in the same directory, renamed when complete: an
# interrupted build never leaves a binary that looks finished.
tmp="$dir/.helm.tmp.$$"
start=$SECONDS
# go build stays in the foreground so Ctrl-C reaches it; the ticker only talks.
(while sleep 30; do echo "  ... helm: $((SECONDS - start))s" >&2; done) &
ticker=$!
# The -X flag gives `helm version` the real version instead of "v4.3"; it only
# changes the link, not the compile.
(cd "$here" && CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" \
	-o "$tmp" helm.sh/helm/v4/cmd/helm)
kill "$ticker" 2>/dev/null || true
ticker=""
mv -f "$tmp" "$bin"
tmp=""
echo "helm $version: done in $((SECONDS - start))s" >&2
echo "$bin"
