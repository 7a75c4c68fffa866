package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	rss, err := statusKiB(pid, "VmRSS")
	if err != nil {
		return u, err
	}
	u.RSSKiB = rss[0]
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

// ContainerStats is a container's memory as its cgroup (v1) and its
// processes show it, and its CPU time so far.
type ContainerStats struct {
	// WorkingSet is usage less inactive file pages: what the kubelet
	// reports and evicts on (cAdvisor's container_memory_working_set_bytes).
	WorkingSet int64
	// Anon and File are the cgroup's anonymous memory (total_rss) and page
	// cache (total_cache); ActiveFile and InactiveFile split the page cache.
	Anon, File, ActiveFile, InactiveFile int64
	// RSS, RSSAnon and RSSFile sum VmRSS, RssAnon and RssFile of the
	// container's processes: resident pages, whichever cgroup pays for them.
	RSS, RSSAnon, RSSFile int64
	// CPU is the container's CPU time so far.
	CPU time.Duration
}

// ReadContainerStats reads a container's ContainerStats from its memory
// cgroup directory (ContainerCgroup) and the matching cpuacct one.
func ReadContainerStats(memoryCgroup string) (ContainerStats, error) {
	var s ContainerStats
	usage, err := readInt(filepath.Join(memoryCgroup, "memory.usage_in_bytes"))
	if err != nil {
		return s, err
	}
	stat, err := os.ReadFile(filepath.Join(memoryCgroup, "memory.stat"))
	if err != nil {
		return s, err
	}
	fields := map[string]*int64{"total_rss": &s.Anon, "total_cache": &s.File, "total_active_file": &s.ActiveFile, "total_inactive_file": &s.InactiveFile}
	for _, line := range strings.Split(string(stat), "\n") {
		k, v, _ := strings.Cut(line, " ")
		if dst := fields[k]; dst != nil {
			*dst, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	s.WorkingSet = usage
	if s.InactiveFile < usage {
		s.WorkingSet -= s.InactiveFile
	}
	procs, err := os.ReadFile(filepath.Join(memoryCgroup, "cgroup.procs"))
	if err != nil {
		return s, err
	}
	for _, p := range strings.Fields(string(procs)) {
		pid, err := strconv.Atoi(p)
		if err != nil {
			continue
		}
		kib, err := statusKiB(pid, "VmRSS", "RssAnon", "RssFile")
		if err != nil {
			continue // gone meanwhile
		}
		s.RSS += int64(kib[0]) << 10
		s.RSSAnon += int64(kib[1]) << 10
		s.RSSFile += int64(kib[2]) << 10
	}
	cpuPath := strings.Replace(memoryCgroup, "/sys/fs/cgroup/memory/", "/sys/fs/cgroup/cpuacct/", 1)
	ns, err := readInt(filepath.Join(cpuPath, "cpuacct.usage"))
	if err != nil {
		return s, err
	}
	s.CPU = time.Duration(ns)
	return s, nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// statusKiB reads kB fields of /proc/PID/status (VmRSS, VmHWM, RssAnon,
// RssFile), in the order asked.
func statusKiB(pid int, fields ...string) ([]int, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := make([]int, len(fields))
	found := 0
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if i := slices.Index(fields, k); ok && i >= 0 {
			f := strings.Fields(v)
			if len(f) == 0 {
				continue
			}
			if out[i], err = strconv.Atoi(f[0]); err != nil {
				return nil, fmt.Errorf("/proc/%d/status: %s: %w", pid, k, err)
			}
			found++
		}
	}
	if found != len(fields) {
		return nil, fmt.Errorf("/proc/%d/status: not all of %s", pid, strings.Join(fields, ", "))
	}
	return out, nil
}
