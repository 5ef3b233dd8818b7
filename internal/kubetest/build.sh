#!/usr/bin/env bash
# Builds etcd (bin/etcd: go.etcd.io/etcd/server/v3's etcdmain) and
# kube-apiserver (bin/kube-apiserver: k8s.io/kubernetes's cmd/kube-apiserver
# with its staging modules pinned) once, CGO off, into a cache directory
# outside the work tree keyed by each module's go.mod and go.sum, so later
# runs reuse them. The tests of internal/kubetest's users start both.
#
# Prints the lines for the Makefile to export:
#   PREFIXGATE_ETCD=<path of etcd>
#   PREFIXGATE_KUBE_APISERVER=<path of kube-apiserver>
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${PREFIXGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/prefixgate}"
mkdir -p "$cache"
log() { echo "kubetest: $*" >&2; }

# build NAME PACKAGE: builds PACKAGE from the module in bin/NAME into
# $cache/NAME-<hash>/NAME unless that binary is already there; prints its path.
build() {
	local name="$1" pkg="$2" mod="$here/bin/$1"
	local key dir out start
	key="$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)"
	dir="$cache/$name-$key"
	out="$dir/$name"
	if [ -x "$out" ] && [ -f "$dir/BUILD" ]; then
		log "cached $out ($(cat "$dir/BUILD"))"
	else
		start=$SECONDS
		log "building $name (several minutes the first time)"
		rm -rf "$dir.tmp"
		mkdir -p "$dir.tmp"
		(cd "$mod" && CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly \
			nice -n "${KUBETEST_NICE:-10}" go build -trimpath -o "$dir.tmp/$name" "$pkg") >&2
		echo "$name built in $((SECONDS - start)) s" >"$dir.tmp/BUILD"
		rm -rf "$dir"
		mv "$dir.tmp" "$dir"
		log "built $out in $((SECONDS - start)) s"
	fi
	echo "$out"
}

etcd="$(build etcd .)"
apiserver="$(build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver)"
"$etcd" --version >/dev/null
"$apiserver" --version >/dev/null

echo "PREFIXGATE_ETCD=$etcd"
echo "PREFIXGATE_KUBE_APISERVER=$apiserver"
