// Command pause is the pod sandbox process of the test nodes' containerd: it
// holds the pod's namespaces and waits for a signal. The real pause image
// cannot be pulled offline, so the harness builds this one and pins it as the
// sandbox image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		// As PID 1 of a pod that shares its PID namespace, reap orphans.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
