package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Usage is the resident memory and the CPU time used so far by a process
// and all its descendants.
type Usage struct {
	// RSSKiB is the sum of the processes' VmRSS.
	RSSKiB int
	// CPU is the sum of their user and system time.
	CPU time.Duration
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports here.
const clockTicks = 100

// TreeUsage reads the usage of pid and its descendants from /proc.
func TreeUsage(pid int) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the parenthesised command: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	if len(f) < 13 {
		return u, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	u.CPU = time.Duration(utime+stime) * time.Second / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if fs := strings.Fields(v); len(fs) > 0 {
				u.RSSKiB, _ = strconv.Atoi(fs[0])
			}
		}
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, c := range strings.Fields(string(b)) {
			child, err := strconv.Atoi(c)
			if err != nil {
				continue
			}
			cu, err := TreeUsage(child)
			if err != nil {
				continue // gone meanwhile
			}
			u.RSSKiB += cu.RSSKiB
			u.CPU += cu.CPU
		}
	}
	return u, nil
}

// Components lists the cluster's own processes by name (control plane,
// controllers, and per real node its kubelet, containerd, kube-proxy and
// "pods": the node's init with the shims and every container it runs).
func (c *Cluster) Components() map[string]*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]*Process{}
	for _, p := range append([]*Process{c.etcd, c.apiserver}, c.extra...) {
		if p == nil {
			continue
		}
		if exited, _ := p.Exited(); !exited {
			m[strings.Replace(p.Name, "/init", "/pods", 1)] = p
		}
	}
	return m
}

// ContainerMemory reads a container's memory working set (usage less
// inactive file pages, as the kubelet reports it) and its CPU time from its
// cgroups (v1).
func ContainerMemory(memoryCgroup string) (workingSetBytes int64, cpu time.Duration, err error) {
	read := func(p string) (int64, error) {
		b, err := os.ReadFile(p)
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	usage, err := read(filepath.Join(memoryCgroup, "memory.usage_in_bytes"))
	if err != nil {
		return 0, 0, err
	}
	stat, err := os.ReadFile(filepath.Join(memoryCgroup, "memory.stat"))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, "total_inactive_file "); ok {
			inactive, _ := strconv.ParseInt(v, 10, 64)
			if inactive < usage {
				usage -= inactive
			}
		}
	}
	cpuPath := strings.Replace(memoryCgroup, "/sys/fs/cgroup/memory/", "/sys/fs/cgroup/cpuacct/", 1)
	ns, err := read(filepath.Join(cpuPath, "cpuacct.usage"))
	if err != nil {
		return usage, 0, err
	}
	return usage, time.Duration(ns), nil
}
