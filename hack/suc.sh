#!/usr/bin/env bash
# Builds the Rancher system-upgrade-controller (SUC) that the e2e tests run
# next to the gate, from the upstream source archive kept in the workplace's
# shared/thirdparty folder (its Go module is not served by the proxy), into a
# cache directory outside the clone keyed by its version and the archive's
# sha256. Built only when missing, so only the first run pays for the compile.
#
#   hack/suc.sh              build if missing; print the binary's path last on stdout
#   hack/suc.sh --print-path only print the path (never builds)
#   hack/suc.sh --print-src  print the archive used (empty when there is none)
#
# Where the archive is absent (a machine outside this workplace) the script
# says so and exits 0 without building: the tests that need SUC then skip with
# a message naming the archive.
#
# The archive is looked up in GUG_THIRDPARTY_DIR, else ../shared/thirdparty and
# ../../shared/thirdparty relative to the repository root (a clone, a worktree).
# GUG_SUC_DIR overrides the cache directory; otherwise it is
# ${GUG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-upgrade-gate}/suc/<version>.
set -euo pipefail

# Pinned: the archive's tag and sha256 from shared/thirdparty/README.md.
version=v0.20.1
archive_name=system-upgrade-controller-$version.tar.gz
archive_sha256=43ff93b8f02c7a93a509c866ee42aff6f21d822b9b6978a7b99e89fc1a0bb1ee

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${GUG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-upgrade-gate}"
dir="${GUG_SUC_DIR:-$cache/suc/$version}"
bin="$dir/system-upgrade-controller"

src=""
for d in ${GUG_THIRDPARTY_DIR:+"$GUG_THIRDPARTY_DIR"} "$root/../shared/thirdparty" "$root/../../shared/thirdparty"; do
	if [[ -f $d/$archive_name ]]; then
		src="$(cd "$d" && pwd)/$archive_name"
		break
	fi
done

case ${1:-} in
--print-path) echo "$bin"; exit 0 ;;
--print-src) echo "$src"; exit 0 ;;
"") ;;
*) echo "usage: $0 [--print-path|--print-src]" >&2; exit 2 ;;
esac

if [[ -x $bin ]]; then
	echo "system-upgrade-controller $version: already built in $dir" >&2
	echo "$bin"
	exit 0
fi
if [[ -z $src ]]; then
	echo "system-upgrade-controller $version: $archive_name not found (GUG_THIRDPARTY_DIR, ../shared/thirdparty, ../../shared/thirdparty); not building it, the tests that run SUC will skip" >&2
	echo "$bin"
	exit 0
fi
sum=$(sha256sum "$src" | cut -d' ' -f1)
if [[ $sum != "$archive_sha256" ]]; then
	echo "suc.sh: $src has sha256 $sum, expected $archive_sha256 (the archive of tag $version)" >&2
	exit 1
fi

work="" tmp="" ticker=""
cleanup() {
	[[ -z $ticker ]] || kill "$ticker" 2>/dev/null || true
	[[ -z $tmp ]] || rm -f "$tmp"
	[[ -z $work ]] || rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$dir"
work=$(mktemp -d "$dir/.src.XXXXXX")
tar -xzf "$src" -C "$work"
echo "building system-upgrade-controller $version from $src (first time only: about 6 minutes of compile on 2 cores)..." >&2
# A temporary name in the same directory, renamed when complete: an
# interrupted build never leaves a binary that looks finished.
tmp="$dir/.system-upgrade-controller.tmp.$$"
start=$SECONDS
# go build stays in the foreground so Ctrl-C reaches it; the ticker only talks.
(while sleep 30; do echo "  ... system-upgrade-controller: $((SECONDS - start))s" >&2; done) &
ticker=$!
# The -X flag gives the startup log the real version; it only changes the link.
(cd "$work" && CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X github.com/rancher/system-upgrade-controller/pkg/version.Version=$version" \
	-o "$tmp" .)
kill "$ticker" 2>/dev/null || true
ticker=""
mv -f "$tmp" "$bin"
tmp=""
echo "system-upgrade-controller $version: done in $((SECONDS - start))s" >&2
echo "$bin"
