#!/usr/bin/env bash
# Builds the etcd and kube-apiserver that the e2e tests, load tests and
# `make demo` run, from the Go modules pinned in hack/tools/*, into a cache
# directory outside the clone keyed by their versions. Each binary is built only
# when it is missing, so only the first run pays for the compile.
#
#   hack/controlplane.sh              build what is missing; print the directory last on stdout
#   hack/controlplane.sh --print-dir  only print the directory (never builds)
#
# GUG_CONTROLPLANE_DIR overrides the directory; otherwise it is
# ${GUG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-upgrade-gate}/controlplane/<versions>.
set -euo pipefail

tools="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/tools"

# modversion DIR MODULE prints the version DIR/go.mod requires of MODULE, so the
# versions live only in the tool modules.
modversion() {
	local v
	v=$(awk -v m="$2" '
		$1 == "require" && $2 == m { print $3; exit }
		$1 == m && $2 ~ /^v/ { print $2; exit }' "$1/go.mod")
	[[ -n $v ]] || { echo "controlplane.sh: $1/go.mod does not require $2" >&2; exit 1; }
	echo "$v"
}

kas_version=$(modversion "$tools/kube-apiserver" k8s.io/kubernetes)
etcd_version=$(modversion "$tools/etcd" go.etcd.io/etcd/server/v3)
cache="${GUG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-upgrade-gate}"
dir="${GUG_CONTROLPLANE_DIR:-$cache/controlplane/$kas_version-etcd-$etcd_version}"

if [[ ${1:-} == --print-dir ]]; then
	echo "$dir"
	exit 0
elif [[ $# -gt 0 ]]; then
	echo "usage: $0 [--print-dir]" >&2
	exit 2
fi

tmp="" ticker=""
cleanup() {
	[[ -z $ticker ]] || kill "$ticker" 2>/dev/null || true
	[[ -z $tmp ]] || rm -f "$tmp"
}
trap cleanup EXIT

# build NAME VERSION TOOLDIR PACKAGE ESTIMATE [go build flags...]
build() {
	local name=$1 version=$2 tooldir=$3 pkg=$4 estimate=$5
	shift 5
	if [[ -x $dir/$name ]]; then
		echo "$name $version: already built in $dir" >&2
		return
	fi
	mkdir -p "$dir"
	echo "building $name $version from its Go module (first time only: $estimate)..." >&2
	# A temporary name in the same directory, renamed when complete: an
	# interrupted build never leaves a binary that looks finished.
	tmp="$dir/.$name.tmp.$$"
	local start=$SECONDS
	# go build stays in the foreground so Ctrl-C reaches it; the ticker only talks.
	(while sleep 30; do echo "  ... $name: $((SECONDS - start))s" >&2; done) &
	ticker=$!
	# Built as the project's tests build (cgo as the environment says, no
	# -trimpath) from the project's module versions where they share a
	# module (internal/testenv's TestToolsShareTheProjectsModuleVersions):
	# 658 of kube-apiserver's 1,847 packages are then the project's own,
	# compiled by then; the compile cache keys on both.
	(cd "$tooldir" && go build "$@" -o "$tmp" "$pkg")
	kill "$ticker" 2>/dev/null || true
	ticker=""
	mv -f "$tmp" "$dir/$name"
	tmp=""
	echo "$name $version: done in $((SECONDS - start))s" >&2
}

build etcd "$etcd_version" "$tools/etcd" go.etcd.io/etcd/server/v3 \
	"about 2 minutes of compile on 2 cores"
# The -X flags give /version and `kubectl version` the real version instead of
# v0.0.0-master; they only change the link, not the compile.
IFS=. read -r kas_major kas_minor _ <<<"${kas_version#v}"
build kube-apiserver "$kas_version" "$tools/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver \
	"about 15 minutes of compile on 2 cores" \
	-ldflags "-X k8s.io/component-base/version.gitVersion=$kas_version -X k8s.io/component-base/version.gitMajor=$kas_major -X k8s.io/component-base/version.gitMinor=$kas_minor -X k8s.io/component-base/version.gitTreeState=clean"

echo "$dir"
