//go:build tools

// Package tools pins the govulncheck that `make vuln` runs.
package tools

import _ "golang.org/x/vuln/cmd/govulncheck"
