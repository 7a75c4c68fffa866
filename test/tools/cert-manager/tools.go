//go:build tools

// Package tools pins cert-manager, whose controller and CA injector the
// cert-manager end-to-end test (test/e2e/certmanager) runs on real nodes.
//
// cert-manager keeps each binary's main package in a module of its own
// (cmd/controller is module .../controller-binary, cmd/cainjector is
// .../cainjector-binary, each with a `replace` to ../../), and those modules
// are not published: the Go module proxy answers 404 for them at every
// version. What is published is the library module
// github.com/cert-manager/cert-manager, which holds every controller, issuer
// and injector. The two programs beside this file (controller/, cainjector/)
// are this project's own wiring of those packages, the way cert-manager's
// cmd/controller/app and cmd/cainjector/app wire them; the certificate logic
// they run is cert-manager's, at the version pinned in go.mod.
package tools

import (
	_ "github.com/cert-manager/cert-manager/pkg/controller"
	_ "github.com/cert-manager/cert-manager/pkg/controller/cainjector"
)
