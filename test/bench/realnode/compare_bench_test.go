//go:build e2e

package realnode_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// settle is how long a freshly rolled-out agent runs before its window:
// past its start-up and first round.
const settle = 30 * time.Second

// pageCache is a state of the agent binaries' page cache when an image's
// pods start. Whether a binary's pages count in a container's working set
// depends on who read them first: cgroup v1 charges a page to the cgroup
// that brought it into the cache.
type pageCache struct {
	name string
	// prepare brings the binaries (every node's copies) into that state.
	prepare func(files []string) error
}

var pageCaches = []pageCache{
	// Every page read by the benchmark (as containerd's unpacking does on a
	// node that just pulled the image): the containers are charged for
	// their anonymous memory only.
	{"warm", func(files []string) error {
		for _, f := range files {
			if err := readAll(f); err != nil {
				return err
			}
		}
		return nil
	}},
	// Unmapped pages dropped: each container is charged for every page of
	// its binary it touches, as after the kernel reclaimed them once.
	{"cold", func(files []string) error {
		for _, f := range files {
			if out, err := exec.Command("dd", "if="+f, "iflag=nocache", "count=0", "status=none").CombinedOutput(); err != nil {
				return fmt.Errorf("drop the page cache of %s: %v: %s", f, err, out)
			}
		}
		return nil
	}},
}

// compareSteady measures the agent containers' memory and CPU with the local
// agent image and with the -realnode.baseline image on the same nodes, in
// -realnode.rounds windows of -realnode.window per image and page-cache
// state, alternating (helm upgrade, so every window has fresh pods) so that
// drift in the machine's load hits both. It reports the medians of each
// image's windows and their difference, then leaves the local image
// installed.
func compareSteady(b *testing.B) {
	ctx := b.Context()
	local, err := harness.ImageRef(filepath.Join(c.BinDir, "images", "kube-node-ready-agent.tar"))
	if err != nil {
		b.Fatal(err)
	}
	base, err := harness.ImageRef(*baseline)
	if err != nil {
		b.Fatal(err)
	}
	if base == local {
		b.Fatalf("-realnode.baseline is %s, the local image's own name: build it under another tag (make images IMAGE_TAG=...)", base)
	}
	var files []string
	for _, n := range c.Nodes {
		f, err := n.ImageFiles("kube-node-ready-agent")
		if err != nil {
			b.Fatal(err)
		}
		files = append(files, f...)
	}
	windows := map[string][]agentWindow{}
	for r := range *rounds {
		for _, pc := range pageCaches {
			// The local image is installed: the baseline first, so that
			// every window starts new pods.
			for _, img := range []string{base, local} {
				if err := pc.prepare(files); err != nil {
					b.Fatal(err)
				}
				w, err := measureImage(ctx, img)
				if err != nil {
					b.Fatal(err)
				}
				windows[pc.name+" "+img] = append(windows[pc.name+" "+img], w)
				fmt.Printf("round %d, page cache %s, %s: %s\n", r+1, pc.name, img, w)
			}
		}
	}
	if _, err := setAgentImage(ctx, local); err != nil {
		b.Fatal(err)
	}
	for _, pc := range pageCaches {
		l, bl := medianWindow(windows[pc.name+" "+local]), medianWindow(windows[pc.name+" "+base])
		b.ReportMetric(l.workingSet, pc.name+"-agent-ws-MiB")
		b.ReportMetric(bl.workingSet, pc.name+"-baseline-ws-MiB")
		// Printed, not logged: the testing package cuts long benchmark logs.
		fmt.Printf("agent container, page cache %s, %d windows of %s per image, alternating; medians of the windows:\n%-9s %s\n%-9s %s\n"+
			"baseline - local: working set %+.1f MiB (ratio %.2f), RSS %+.1f MiB (anon %+.1f, file %+.1f)\n",
			pc.name, *rounds, *window, "local", l, "baseline", bl,
			bl.workingSet-l.workingSet, bl.workingSet/l.workingSet, bl.rss-l.rss, bl.rssAnon-l.rssAnon, bl.rssFile-l.rssFile)
	}
}

func readAll(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}

// measureImage rolls the agents out with image and samples one window of
// every node's agent container.
func measureImage(ctx context.Context, image string) (agentWindow, error) {
	cgroups, err := setAgentImage(ctx, image)
	if err != nil {
		return agentWindow{}, err
	}
	select {
	case <-ctx.Done():
		return agentWindow{}, ctx.Err()
	case <-time.After(settle):
	}
	return sampleAgents(ctx, cgroups, *window, func() {})
}

// setAgentImage upgrades the release to image and returns the memory cgroups
// of its agent containers once one runs on every live node.
func setAgentImage(ctx context.Context, image string) (map[string]string, error) {
	i := strings.LastIndex(image, ":")
	if err := upgrade(ctx, "--set", "agent.image.repository="+image[:i], "--set", "agent.image.tag="+image[i+1:]); err != nil {
		return nil, err
	}
	var cgroups map[string]string
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		cgroups, last = agentCgroups(ctx, image)
		return last == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("agents of %s: %w (last: %v)", image, err, last)
	}
	return cgroups, nil
}

// medianWindow is the window of each field's median over ws.
func medianWindow(ws []agentWindow) agentWindow {
	field := func(f func(agentWindow) float64) float64 {
		var v []float64
		for _, w := range ws {
			v = append(v, f(w))
		}
		return median(v)
	}
	return agentWindow{
		workingSet:    field(func(w agentWindow) float64 { return w.workingSet }),
		workingSetMax: field(func(w agentWindow) float64 { return w.workingSetMax }),
		anon:          field(func(w agentWindow) float64 { return w.anon }),
		file:          field(func(w agentWindow) float64 { return w.file }),
		rss:           field(func(w agentWindow) float64 { return w.rss }),
		rssAnon:       field(func(w agentWindow) float64 { return w.rssAnon }),
		rssFile:       field(func(w agentWindow) float64 { return w.rssFile }),
		millicores:    field(func(w agentWindow) float64 { return w.millicores }),
	}
}

func (w agentWindow) String() string {
	return fmt.Sprintf("working set %.1f MiB (max %.1f; cgroup anon %.1f, page cache %.1f), RSS %.1f MiB (anon %.1f, file %.1f), CPU %.2f millicores",
		w.workingSet, w.workingSetMax, w.anon, w.file, w.rss, w.rssAnon, w.rssFile, w.millicores)
}
