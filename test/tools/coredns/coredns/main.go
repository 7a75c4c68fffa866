// Command coredns is CoreDNS, at the version go.mod pins, with the plugins
// the tests' Corefiles use (test/harness/dns.go for the control plane,
// test/harness/coredns_deploy.go for real nodes) and a few an operator
// reaches for when reading one (forward, log, loop, reload, loadbalance,
// metrics, whoami). It is how CoreDNS documents building with a chosen
// plugin set: its own main (github.com/coredns/coredns) imports
// core/plugin, which links every plugin, the cloud providers' SDKs and
// tracers among them, and took 255 CPU-seconds to compile from an empty
// cache against 158 for this set. The directives' order is CoreDNS's own
// (core/dnsserver's Directives); a directive a Corefile names without its
// plugin linked here fails at start-up with CoreDNS's own error.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/whoami"
)

func main() { coremain.Run() }
