#!/usr/bin/env bash
# Builds the staticcheck pinned in this module into bin/staticcheck, or keeps
# the one there when its stamp matches. On its own so that `make lint` needs
# only this, not the toolchain the e2e tests need (build.sh runs it too).
set -euo pipefail

# shellcheck source=../lib.sh
source "$(dirname "$0")/../lib.sh"

build staticcheck "$tools/staticcheck" honnef.co/go/tools staticcheck=honnef.co/go/tools/cmd/staticcheck
