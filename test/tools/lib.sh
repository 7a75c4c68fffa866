#!/usr/bin/env bash
# Shared by the scripts that build the pinned test tools (build.sh, and the
# single-tool scripts such as staticcheck/build.sh that `make lint` runs
# without the rest): the bin/ layout and the stamped, rebuild-when-stale
# `build` function. Source it; it sets root, bin and tools.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin="$root/bin"
mkdir -p "$bin"
# Every tool builds with the project's toolchain, the Makefile's GOTOOLCHAIN,
# also when a script runs on its own (build.sh says why).
export GOTOOLCHAIN=${GOTOOLCHAIN:-$(sed -n 's/^export GOTOOLCHAIN := //p' "$root/Makefile")}
# The compiler and linker with the Makefile's BUILD_GOGC (400: about 13 % less
# CPU for 14 % more memory, the Makefile says where that was measured), unless
# GOGC is set.
export GOGC=${GOGC:-$(sed -n 's/^BUILD_GOGC ?= //p' "$root/Makefile")}

# build NAME MODULE_DIR PINNED_MODULE BINARY=PACKAGE...  ($LDFLAGS applies)
# All packages of one tool go to one `go build -o bin/` so that the packages
# they share compile once (the six Kubernetes binaries share most of theirs).
# The tools link without a symbol table and DWARF (-s -w), as release builds
# do: a third less link time for the six Kubernetes binaries (17 -> 10 s),
# and their panics and profiles still name functions.
build() {
	local name=$1 dir=$2 mod=$3
	shift 3
	local version stamp="$bin/.stamp-$name" pinned ldflags="-s -w ${LDFLAGS:-}"
	pinned=$(cd "$dir" && go list -m -f '{{.Version}}' "$mod")
	version="$mod@$pinned $(go env GOVERSION) ldflags:$(printf %s "$ldflags${TAGS:-}" | sha256sum | cut -c1-12)"
	if [[ -f "$stamp" && "$(cat "$stamp")" == "$version" ]] && all_present "$@"; then
		ready "$@"
		return 0
	fi
	echo ">> building $name ($version)"
	local start=$SECONDS spec pkgs=() out
	out=$(mktemp -d "$bin/.build-$name.XXXXXX")
	for spec in "$@"; do
		pkgs+=("${spec#*=}")
	done
	(cd "$dir" && CGO_ENABLED=0 go build -trimpath -tags "${TAGS:-}" -ldflags "$ldflags" -o "$out/" "${pkgs[@]}")
	# go build names each binary after the last element of its package path,
	# skipping a major-version suffix (go.etcd.io/etcd/server/v3 -> server).
	local pkg built
	for spec in "$@"; do
		pkg=${spec#*=}
		built=$(basename "$pkg")
		[[ $built =~ ^v[0-9]+$ ]] && built=$(basename "$(dirname "$pkg")")
		mv "$out/$built" "$bin/${spec%%=*}"
	done
	rmdir "$out"
	echo "$version" >"$stamp"
	echo ">> built $name in $((SECONDS - start))s"
	ready "$@"
}

# ready BINARY=PACKAGE... (or a path under bin/) tells the e2e tests waiting
# in make test for a later tool that it is there (harness.LaterTool reads
# bin/.tools-later, which exists only while make test builds them).
ready() {
	local spec
	[[ -f "$bin/.tools-later" ]] || return 0
	for spec in "$@"; do
		echo "ready ${spec%%=*}" >>"$bin/.tools-later"
	done
}

all_present() {
	local p
	for p in "$@"; do
		[[ -x "$bin/${p%%=*}" ]] || return 1
	done
}

tools="$root/test/tools"
