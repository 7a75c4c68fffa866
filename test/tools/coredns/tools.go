//go:build tools

// Package tools pins the CoreDNS server the tests resolve through.
package tools

import _ "github.com/coredns/coredns"
