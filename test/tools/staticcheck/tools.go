//go:build tools

// Package tools pins the staticcheck that `make lint` runs.
package tools

import _ "honnef.co/go/tools/cmd/staticcheck"
