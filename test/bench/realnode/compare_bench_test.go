//go:build e2e

package realnode_test

import (
	"context"
	"fmt"
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

// compareSteady measures the agent containers' memory and CPU with the local
// agent image and with the -realnode.baseline image on the same nodes, in
// -realnode.rounds windows of -realnode.window each, alternating the images
// (helm upgrade) so that drift in the machine's load hits both. It reports
// the medians of each image's windows and their difference, then leaves the
// local image installed.
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
	images := []string{local, base}
	windows := map[string][]agentWindow{}
	for r := range *rounds {
		for _, img := range images {
			w, err := measureImage(ctx, img)
			if err != nil {
				b.Fatal(err)
			}
			windows[img] = append(windows[img], w)
			fmt.Printf("round %d, %s: %s\n", r+1, img, w)
		}
	}
	if _, err := setAgentImage(ctx, local); err != nil {
		b.Fatal(err)
	}
	l, bl := medianWindow(windows[local]), medianWindow(windows[base])
	b.ReportMetric(l.workingSet, "agent-ws-p50-MiB")
	b.ReportMetric(bl.workingSet, "baseline-ws-p50-MiB")
	b.ReportMetric(bl.workingSet-l.workingSet, "baseline-minus-local-ws-MiB")
	// Printed, not logged: the testing package cuts long benchmark logs.
	fmt.Printf("agent container, %d windows of %s per image, alternating; medians of the windows:\n%-14s %s\n%-14s %s\n"+
		"baseline - local: working set %+.1f MiB (ratio %.2f), RSS %+.1f MiB (anon %+.1f, file %+.1f)\n",
		*rounds, *window, "local", l, "baseline", bl,
		bl.workingSet-l.workingSet, bl.workingSet/l.workingSet, bl.rss-l.rss, bl.rssAnon-l.rssAnon, bl.rssFile-l.rssFile)
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
