// Command manifestgen writes manifests/ from the Helm chart: the kustomize
// base, a component and an overlay per chart option, the uninstall objects
// and kube-node-ready.yaml. `make manifests` runs it from the repository root.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/kube-node-ready/kube-node-ready/hack/manifestgen"
)

func main() {
	helm := flag.String("helm", "bin/helm", "the helm binary")
	chart := flag.String("chart", "charts/kube-node-ready", "the chart directory")
	out := flag.String("out", "manifests", "the directory to write")
	flag.Parse()
	files, err := manifestgen.Generate(context.Background(), *helm, *chart)
	if err != nil {
		log.Fatal(err)
	}
	if err := manifestgen.Write(*out, files); err != nil {
		log.Fatal(err)
	}
}
