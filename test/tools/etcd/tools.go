//go:build tools

// Package tools pins the etcd server the tests run against.
package tools

import _ "go.etcd.io/etcd/server/v3"
