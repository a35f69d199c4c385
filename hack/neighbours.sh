#!/usr/bin/env bash
# Builds the real neighbours the e2e tests run next to the gate (issue 11):
# nfd-master (node-feature-discovery) and the cert-manager controller and
# cainjector, from the upstream source archives kept in the workplace's
# shared/thirdparty folder (their commands are not served by the Go module
# proxy), into cache directories outside the clone keyed by version. Each
# binary is built only when missing, so only the first run pays for the compile;
# the CRDs the tests install are copied from the same trees.
#
#   hack/neighbours.sh              build what is missing; print nothing on stdout
#   hack/neighbours.sh --print-dirs only print NFD_DIR=... and CERT_MANAGER_DIR=... (never builds)
#
# Where an archive is absent (a machine outside this workplace) the script says
# so and exits 0 without building it: the tests that need it then skip with a
# message naming the archive.
#
# The archives are looked up in GUG_THIRDPARTY_DIR, else ../shared/thirdparty
# and ../../shared/thirdparty relative to the repository root (a clone, a
# worktree). The cache is
# ${GUG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-upgrade-gate}/{nfd,cert-manager}/<version>.
set -euo pipefail

# Pinned: the archives' tags and sha256 from shared/thirdparty/README.md.
nfd_version=v0.19.0
nfd_sha256=73a538ee8d34e32b2160791db56f79c09fe82b143dc79563cac41137bf9041ca
cm_version=v1.21.1
cm_sha256=6a250b4a89b975fe1d91730e184e8be18f550418d33b15b308457366bf0cc03e

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${GUG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-upgrade-gate}"
nfd_dir="$cache/nfd/$nfd_version"
cm_dir="$cache/cert-manager/$cm_version"

# built: every neighbour binary and chart is in the cache already.
built() {
	[[ -x $nfd_dir/nfd-master && -f $nfd_dir/chart/Chart.yaml && -x $cm_dir/controller && -x $cm_dir/cainjector ]]
}

# A first `make test` builds the neighbours in the background from its start
# (--background), at a lower priority: the rest of the run leaves cores idle
# (single-threaded links, tests waiting on their API servers; a warm run keeps
# about 40% of two cores busy) and the build fills them. Every build holds a
# lock, so the neighbours target waits for the one in the background instead
# of starting its own, shows what it printed, and finds the binaries built
# (or builds what it left missing, saying why).
mkdir -p "$cache"
lock="$cache/.neighbours.lock" log="$cache/.neighbours-background.log"
case ${1:-} in
--print-dirs) echo "NFD_DIR=$nfd_dir"; echo "CERT_MANAGER_DIR=$cm_dir"; exit 0 ;;
--background)
	# Not twice: a build already holding the lock is left to finish.
	if ! built && flock -n "$lock" true; then
		echo "building the neighbours in the background, at a lower priority, while the rest of the tests run (log: $log)" >&2
		nohup nice -n 10 "$0" --in-background >"$log" 2>&1 </dev/null &
	fi
	exit 0 ;;
--in-background | "") ;;
*) echo "usage: $0 [--print-dirs|--background]" >&2; exit 2 ;;
esac

exec 9>"$lock"
if ! flock -n 9; then
	echo "waiting for the neighbours' build in the background to finish..." >&2
	flock 9
fi
if [[ ${1:-} != --in-background && -s $log ]]; then
	# What the background build printed, shown once by the neighbours target.
	sed 's/^/(background) /' "$log" >&2
	rm -f "$log"
fi

# archive NAME SHA256 prints the archive's path, or nothing when it is absent.
archive() {
	local d
	for d in ${GUG_THIRDPARTY_DIR:+"$GUG_THIRDPARTY_DIR"} "$root/../shared/thirdparty" "$root/../../shared/thirdparty"; do
		if [[ -f $d/$1 ]]; then
			local src sum
			src="$(cd "$d" && pwd)/$1"
			sum=$(sha256sum "$src" | cut -d' ' -f1)
			if [[ $sum != "$2" ]]; then
				echo "neighbours.sh: $src has sha256 $sum, expected $2" >&2
				exit 1
			fi
			echo "$src"
			return
		fi
	done
}

work="" tmp="" ticker=""
cleanup() {
	[[ -z $ticker ]] || kill "$ticker" 2>/dev/null || true
	[[ -z $tmp ]] || rm -f "$tmp"
	[[ -z $work ]] || rm -rf "$work"
}
trap cleanup EXIT

# build NAME VERSION DIR MODDIR PACKAGE ESTIMATE [go build flags...]: builds
# PACKAGE inside $work/MODDIR to DIR/NAME.
build() {
	local name=$1 version=$2 dir=$3 moddir=$4 pkg=$5 estimate=$6
	shift 6
	echo "building $name $version from its source archive (first time only: $estimate)..." >&2
	# A temporary name in the same directory, renamed when complete: an
	# interrupted build never leaves a binary that looks finished.
	tmp="$dir/.$name.tmp.$$"
	local start=$SECONDS
	# go build stays in the foreground so Ctrl-C reaches it; the ticker only talks.
	(while sleep 30; do echo "  ... $name: $((SECONDS - start))s" >&2; done) &
	ticker=$!
	(cd "$work/$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $*" -o "$tmp" "$pkg")
	kill "$ticker" 2>/dev/null || true
	ticker=""
	mv -f "$tmp" "$dir/$name"
	tmp=""
	echo "$name $version: done in $((SECONDS - start))s" >&2
}

# extract ARCHIVE DIR unpacks a fresh copy of ARCHIVE under DIR into $work.
extract() {
	mkdir -p "$2"
	rm -rf "$work"
	work=$(mktemp -d "$2/.src.XXXXXX")
	tar -xzf "$1" -C "$work"
}

# copy SRC DEST copies a file under a temporary name, then renames it.
copy() {
	cp "$1" "$2.tmp.$$"
	mv -f "$2.tmp.$$" "$2"
}

nfd_archive=node-feature-discovery-$nfd_version.tar.gz
if [[ -x $nfd_dir/nfd-master && -f $nfd_dir/chart/Chart.yaml ]]; then
	echo "nfd-master $nfd_version: already built in $nfd_dir" >&2
elif src=$(archive "$nfd_archive" "$nfd_sha256") && [[ -n $src ]]; then
	extract "$src" "$nfd_dir"
	copy "$work/deployment/base/nfd-crds/nfd-api-crds.yaml" "$nfd_dir/crds.yaml"
	# NFD's own Helm chart: the tests install it to get the ServiceAccounts
	# and RBAC a real `helm install nfd` creates.
	rm -rf "$nfd_dir/.chart.tmp.$$"
	cp -r "$work/deployment/helm/node-feature-discovery" "$nfd_dir/.chart.tmp.$$"
	rm -rf "$nfd_dir/chart"
	mv "$nfd_dir/.chart.tmp.$$" "$nfd_dir/chart"
	if [[ ! -x $nfd_dir/nfd-master ]]; then
		# nfd-master serves metrics and health on every interface with no flag
		# to choose; the tests run it on a shared machine, so this copy binds it
		# to loopback (the only change to the upstream tree).
		sed -i 's|Addr: fmt.Sprintf(":%d", m.args.Port)|Addr: fmt.Sprintf("127.0.0.1:%d", m.args.Port)|' "$work/pkg/nfd-master/nfd-master.go"
		grep -q 'Addr: fmt.Sprintf("127.0.0.1:%d"' "$work/pkg/nfd-master/nfd-master.go" ||
			{ echo "neighbours.sh: the bind-address patch no longer applies to pkg/nfd-master/nfd-master.go" >&2; exit 1; }
		build nfd-master "$nfd_version" "$nfd_dir" . ./cmd/nfd-master "about 5 minutes of compile on 2 cores (15 on a loaded one)" \
			-X sigs.k8s.io/node-feature-discovery/pkg/version.version=$nfd_version
	fi
else
	echo "nfd-master $nfd_version: $nfd_archive not found (GUG_THIRDPARTY_DIR, ../shared/thirdparty, ../../shared/thirdparty); not building it, the tests that run nfd-master will skip" >&2
fi

cm_archive=cert-manager-$cm_version.tar.gz
if [[ -x $cm_dir/controller && -x $cm_dir/cainjector ]]; then
	echo "cert-manager $cm_version: already built in $cm_dir" >&2
elif src=$(archive "$cm_archive" "$cm_sha256") && [[ -n $src ]]; then
	extract "$src" "$cm_dir"
	# The controller imports the Venafi issuer, whose module
	# github.com/Venafi/vcert/v5 the Go module proxy here refuses (every
	# version). This copy drops the Venafi imports and controller names from the
	# two files that register them; the SelfSigned and CA issuers the chart uses
	# are untouched. The cainjector needs no change.
	sed -i '/venafi/d' "$work/cmd/controller/app/start.go" "$work/internal/apis/config/controller/v1alpha1/defaults.go"
	mkdir -p "$cm_dir/crds"
	for f in "$work"/deploy/crds/*.yaml; do copy "$f" "$cm_dir/crds/$(basename "$f")"; done
	ld="-X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$cm_version"
	# cmd/controller and cmd/cainjector are their own modules that replace
	# cert-manager with ../../, so they build inside the whole tree.
	[[ -x $cm_dir/cainjector ]] ||
		build cainjector "$cm_version" "$cm_dir" cmd/cainjector . "about 3 minutes of compile on 2 cores" "$ld"
	[[ -x $cm_dir/controller ]] ||
		build controller "$cm_version" "$cm_dir" cmd/controller . "about 5 minutes of compile on 2 cores" "$ld"
else
	echo "cert-manager $cm_version: $cm_archive not found (GUG_THIRDPARTY_DIR, ../shared/thirdparty, ../../shared/thirdparty); not building it, the tests that run cert-manager will skip" >&2
fi
