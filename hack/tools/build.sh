#!/usr/bin/env bash
# Builds a Go tool pinned in hack/tools/<name>/go.mod into a cache directory
# outside the clone keyed by the tool's version (the approach of
# hack/controlplane.sh): built only when missing, under a temporary name
# renamed when complete, with progress printed.
#
#   hack/tools/build.sh <name> <module> <package>               build if missing; print the path last
#
# <name> may be a path (peers/kyverno: hack/tools/peers/kyverno/go.mod); the
# binary is named after its last element.
#   hack/tools/build.sh <name> <module> <package> --print-path  only print the path (never builds)
#
# The version is <module>'s in hack/tools/<name>/go.mod. GUG_CACHE_DIR
# overrides the cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/gpu-upgrade-gate).
# EXTRA_LDFLAGS adds to the link flags; "$version" in it is expanded.
# LIKE_TESTS=1 builds the tool as the project's tests build (cgo as the
# environment says, no -trimpath) instead of static and trimmed: a tool whose
# module versions agree with the project's (helm; internal/testenv's
# TestToolsShareTheProjectsModuleVersions) then reuses every package the
# project's vet and tests compiled, where built static and trimmed it shared
# none (the compile cache keys on both).
set -euo pipefail

[[ $# -ge 3 && $# -le 4 ]] || { echo "usage: $0 <name> <module> <package> [--print-path]" >&2; exit 2; }
name=$1 module=$2 pkg=$3
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$name"

version=$(awk -v m="$module" '
	$1 == "require" && $2 == m { print $3; exit }
	$1 == m && $2 ~ /^v/ { print $2; exit }' "$here/go.mod")
[[ -n $version ]] || { echo "build.sh: $here/go.mod does not require $module" >&2; exit 1; }
cache="${GUG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-upgrade-gate}"
dir="$cache/$name/$version"
base=${name##*/}
bin="$dir/$base"

if [[ ${4:-} == --print-path ]]; then
	echo "$bin"
	exit 0
elif [[ $# -eq 4 ]]; then
	echo "usage: $0 <name> <module> <package> [--print-path]" >&2
	exit 2
fi

if [[ -x $bin ]]; then
	echo "$name $version: already built in $dir" >&2
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
echo "building $name $version from its Go module (first time only)..." >&2
# A temporary name in the same directory, renamed when complete: an
# interrupted build never leaves a binary that looks finished.
tmp="$dir/.$base.tmp.$$"
start=$SECONDS
# go build stays in the foreground so Ctrl-C reaches it; the ticker only talks.
(while sleep 30; do echo "  ... $name: $((SECONDS - start))s" >&2; done) &
ticker=$!
extra=${EXTRA_LDFLAGS:-}
ldflags="-s -w ${extra//\$version/$version}"
if [[ ${LIKE_TESTS:-} == 1 ]]; then
	(cd "$here" && go build -ldflags "$ldflags" -o "$tmp" "$pkg")
else
	(cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg")
fi
kill "$ticker" 2>/dev/null || true
ticker=""
mv -f "$tmp" "$bin"
tmp=""
echo "$name $version: done in $((SECONDS - start))s" >&2
echo "$bin"
