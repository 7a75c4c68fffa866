//go:build tools

// Package tools pins the Go vulnerability database that `make vuln` checks
// against: golang.org/x/vulndb, whose data/osv holds every report as OSV
// JSON, and its indexdb command, which turns that folder into the database
// layout govulncheck reads with -db file://. The module proxy serves it, so
// the check needs neither vuln.go.dev nor a network at run time, and its
// answer changes only when this pin does.
package tools

import _ "golang.org/x/vulndb/cmd/indexdb"
