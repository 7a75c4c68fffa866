// Command knr-registry serves an in-memory OCI registry on loopback, for
// tests that push to a registry offline (test/e2e/release pushes the
// release's chart with `helm push`). It prints the address it listens on,
// host:port, as its first line of output and serves until killed.
package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(l.Addr().String())
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(os.Stderr, "knr-registry: ", log.LstdFlags)))}
	log.Fatal(srv.Serve(l))
}
