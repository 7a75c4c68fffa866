#!/usr/bin/env bash
# Builds what `make vuln` needs, each kept when its stamp matches:
# bin/govulncheck (pinned in this module) and bin/vulndb, the Go vulnerability
# database in the layout `govulncheck -db file://` reads, indexed by the pinned
# golang.org/x/vulndb's own indexdb command from that module's data/osv.
# vuln.go.dev is not needed: the module proxy serves the data like any module,
# checked against go.sum.
set -euo pipefail

# shellcheck source=../lib.sh
source "$(dirname "$0")/../lib.sh"

build govulncheck "$tools/govulncheck" golang.org/x/vuln govulncheck=golang.org/x/vuln/cmd/govulncheck
build vulndb-index "$tools/vulndb" golang.org/x/vulndb knr-vulndb-index=golang.org/x/vulndb/cmd/indexdb

db="$bin/vulndb" stamp="$bin/.stamp-vulndb"
version=$(cat "$bin/.stamp-vulndb-index")
if [[ -f "$stamp" && "$(cat "$stamp")" == "$version" && -f "$db/index/db.json" ]]; then
	exit 0
fi
echo ">> indexing the Go vulnerability database ($version)"
src=$(cd "$tools/vulndb" && go mod download -json golang.org/x/vulndb | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -n "$src" && -d "$src/data/osv" ]] ||
	{ echo "golang.org/x/vulndb: data/osv not found (go mod download failed?)" >&2; exit 1; }
tmp=$(mktemp -d "$bin/.vulndb.XXXXXX")
"$bin/knr-vulndb-index" -vulns "$src/data/osv" -out "$tmp/db"
rm -rf "$db" && mv "$tmp/db" "$db" && rmdir "$tmp"
echo "$version" >"$stamp"
