package harness

// APIServer is the plane's kube-apiserver process, for benchmarks that
// measure what it costs (TreeUsage of its Pid).
func (cp *ControlPlane) APIServer() *Process {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.apiserver
}

// Etcd is the plane's etcd process.
func (cp *ControlPlane) Etcd() *Process {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.etcd
}
