#!/usr/bin/env bash
# Renders the krew manifest of kubectl node-ready from node-ready.yaml.tmpl
# beside this script and prints it:
#
#   render.sh VERSION URI_BASE DIST_DIR > DIST_DIR/node-ready.yaml
#
# VERSION is the release (0.3.0, the VERSION file, or its tag v0.3.0); URI_BASE is where the
# archives will be downloaded from; DIST_DIR holds the four
# kubectl-node_ready_<os>_<arch>.tar.gz that `make dist` built, whose sha256
# go into the manifest.
set -euo pipefail
if [[ $# -ne 3 ]]; then
	echo "usage: $0 VERSION URI_BASE DIST_DIR" >&2
	exit 2
fi
version=$1 base=$2 dist=$3
# krew wants a semantic version with a leading v: 0.3.0 becomes v0.3.0, and
# anything else (a commit from git describe) a pre-release of v0.0.0.
if [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]]; then
	version=v$version
elif [[ ! $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]]; then
	version="v0.0.0-${version//[^0-9A-Za-z-]/-}"
fi
subst=(-e "s|{{VERSION}}|${version}|g" -e "s|{{URI_BASE}}|${base%/}|g")
for platform in linux_amd64 linux_arm64 darwin_amd64 darwin_arm64; do
	archive=$dist/kubectl-node_ready_$platform.tar.gz
	if [[ ! -r $archive ]]; then
		echo "$0: $archive missing: run make dist" >&2
		exit 1
	fi
	sum=$(sha256sum "$archive")
	subst+=(-e "s|{{SHA256_${platform^^}}}|${sum%% *}|g")
done
# The template's own comment lines (about placeholders) stay out of the manifest.
out=$(sed "${subst[@]}" -e '/^#/d' "$(dirname "$0")/node-ready.yaml.tmpl")
if grep -n '{{' <<<"$out" >&2; then
	echo "$0: placeholders left unfilled (above)" >&2
	exit 1
fi
printf '%s\n' "$out"
