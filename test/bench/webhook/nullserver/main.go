// Command nullserver is the benchmark floor: a TLS server that answers every
// POST with the same allowed AdmissionReview, without reading it.
package main

import (
	"crypto/tls"
	"flag"
	"io"
	"log"
	"net/http"
)

var answer = []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":true}}`)

func main() {
	addr := flag.String("listen", "127.0.0.1:9443", "listen address")
	cert := flag.String("cert", "", "certificate file")
	key := flag.String("key", "", "key file")
	flag.Parse()
	pair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{
		Addr:      *addr,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer)
		}),
	}
	log.Fatal(srv.ListenAndServeTLS("", ""))
}
