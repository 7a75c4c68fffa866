// Command maketesttime measures how long `make test` takes in a fresh clone,
// as a new contributor or CI meets it, and writes the result into the table
// "How long make test takes" of docs/benchmarks.md.
//
//	go run ./hack/maketesttime -mode=cold       # empty GOCACHE, GOMODCACHE and XDG_CACHE_HOME, no bin/
//	go run ./hack/maketesttime -mode=warm       # the Go caches kept, the tools already in bin/
//	go run ./hack/maketesttime -mode=cold,warm  # both, one after the other in one clone
//
// It clones the repository (the commit given, else HEAD) into a new
// directory and runs `make <target>` there with GOTOOLCHAIN set as the
// Makefile sets it. A cold run starts from empty Go caches and no bin/, as CI
// and a new contributor do. A warm run is the run that follows: the Go caches
// and the tools in bin/ are there (make reuses them), so it times the build,
// lint and the tests themselves; alone, it first builds the tools with
// `make tools` from the machine's Go caches, untimed. It samples the load
// average every 10 s and replaces the table's row of each mode with what it
// measured: the commit, the date, the machine (CPU model, cores, memory, OS,
// virtualization), the load at the start, its highest and at the end, the
// result and the time. The clone and its caches are removed afterwards
// unless -keep.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	modes := flag.String("mode", "", "cold (empty GOCACHE, GOMODCACHE and XDG_CACHE_HOME, no bin/), warm (the Go caches and the tools in bin/ there), or cold,warm (both in one clone)")
	target := flag.String("target", "test", "the make target to time")
	repo := flag.String("repo", "", "the repository to clone (default: the one this runs in)")
	commit := flag.String("commit", "HEAD", "the commit to check out in the clone")
	doc := flag.String("doc", "", "the document whose table to rewrite (default: docs/benchmarks.md of -repo); \"-\" prints the rows only")
	keep := flag.Bool("keep", false, "keep the clone, its caches and the logs")
	flag.Parse()
	var cold bool
	switch *modes {
	case "cold", "cold,warm":
		cold = true
	case "warm":
	default:
		log.Fatalf("maketesttime: -mode must be cold, warm or cold,warm, not %q", *modes)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *repo == "" {
		out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			log.Fatalf("maketesttime: not in a git repository (give -repo): %v", err)
		}
		*repo = strings.TrimSpace(string(out))
	}
	if *doc == "" {
		*doc = filepath.Join(*repo, "docs", "benchmarks.md")
	}
	c, err := newClone(ctx, *repo, *commit, cold, *keep)
	if err != nil {
		log.Fatalf("maketesttime: %v", err)
	}
	defer c.remove()
	if !cold {
		if err := c.make(ctx, "tools", "tools.log"); err != nil {
			log.Fatalf("maketesttime: building the tools before a warm run: %v; the log's end:\n%s", err, tail(filepath.Join(c.dir, "tools.log"), 40))
		}
	}
	for _, mode := range strings.Split(*modes, ",") {
		m := c.measure(ctx, mode, *target)
		if ctx.Err() != nil {
			log.Fatalf("maketesttime: %v", ctx.Err())
		}
		row := m.row()
		fmt.Println(row)
		if *doc == "-" {
			continue
		}
		if err := writeRow(*doc, mode, row); err != nil {
			log.Fatalf("maketesttime: %s: %v", *doc, err)
		}
		log.Printf("wrote the %s row of %s", mode, *doc)
	}
}

func writeRow(doc, mode, row string) error {
	b, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	out, err := replaceRow(string(b), mode, row)
	if err != nil {
		return err
	}
	return os.WriteFile(doc, []byte(out), 0o644)
}

// measurement is one timed run.
type measurement struct {
	mode, target, commit string
	date                 time.Time
	machine              string
	load                 loadSamples
	took                 time.Duration
	err                  error
}

// clone is the fresh clone the runs happen in, with the environment they
// run with.
type clone struct {
	dir, src, commit string
	env              []string
	keep             bool
}

// newClone clones repo at commit into a new directory; with emptyCaches the
// Go caches are new empty directories beside it.
func newClone(ctx context.Context, repo, commit string, emptyCaches, keep bool) (*clone, error) {
	dir, err := os.MkdirTemp("", "knr-maketesttime-")
	if err != nil {
		return nil, err
	}
	c := &clone{dir: dir, src: filepath.Join(dir, "kube-node-ready"), keep: keep}
	if keep {
		log.Printf("keeping %s", dir)
	}
	if err := c.init(ctx, repo, commit, emptyCaches); err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

func (c *clone) init(ctx context.Context, repo, commit string, emptyCaches bool) error {
	if err := run(ctx, "", os.Stderr, nil, "git", "clone", "--quiet", repo, c.src); err != nil {
		return err
	}
	if err := run(ctx, c.src, os.Stderr, nil, "git", "checkout", "--quiet", commit); err != nil {
		return err
	}
	out, err := exec.Command("git", "-C", c.src, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return fmt.Errorf("git rev-parse: %w", err)
	}
	c.commit = strings.TrimSpace(string(out))
	c.env = append(os.Environ(), "GOTOOLCHAIN="+toolchain(c.src), "CI=true")
	if emptyCaches {
		for _, v := range []string{"GOCACHE", "GOMODCACHE", "XDG_CACHE_HOME"} {
			d := filepath.Join(c.dir, strings.ToLower(v))
			if err := os.Mkdir(d, 0o755); err != nil {
				return err
			}
			c.env = append(c.env, v+"="+d)
		}
	}
	return nil
}

func (c *clone) remove() {
	if !c.keep {
		removeAll(c.dir)
	}
}

// make runs make target in the clone, its output into logName beside it.
func (c *clone) make(ctx context.Context, target, logName string) error {
	logFile, err := os.Create(filepath.Join(c.dir, logName))
	if err != nil {
		return err
	}
	defer logFile.Close()
	return run(ctx, c.src, logFile, c.env, "make", "--no-print-directory", target)
}

// measure times make target in the clone as a run of the mode given.
func (c *clone) measure(ctx context.Context, mode, target string) measurement {
	m := measurement{mode: mode, target: target, commit: c.commit, machine: machine()}
	logName := "make-" + mode + ".log"
	log.Printf("make %s in %s (%s, %s), log %s", target, c.src, m.commit, mode, filepath.Join(c.dir, logName))
	m.date = time.Now().UTC()
	done := make(chan struct{})
	samples := make(chan loadSamples, 1)
	go func() { samples <- sampleLoad(done, 10*time.Second) }()
	m.err = c.make(ctx, target, logName)
	m.took = time.Since(m.date)
	close(done)
	m.load = <-samples
	if m.err != nil {
		log.Printf("make %s failed after %s: %v; the log's end:\n%s", target, m.took.Round(time.Second), m.err, tail(filepath.Join(c.dir, logName), 40))
		if !c.keep {
			log.Printf("(run with -keep to keep the whole log)")
		}
	}
	return m
}

// toolchain is the GOTOOLCHAIN the clone's Makefile exports, so the clone is
// timed with the toolchain it names (the export a user is told to set).
func toolchain(src string) string {
	b, err := os.ReadFile(filepath.Join(src, "Makefile"))
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "export GOTOOLCHAIN := "); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	return os.Getenv("GOTOOLCHAIN")
}

func run(ctx context.Context, dir string, out io.Writer, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.Env = dir, out, out, env
	// make and its children are one process group, stopped together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// removeAll removes dir, with the module cache's read-only directories.
func removeAll(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		log.Printf("remove %s: %v", dir, err)
	}
}

func tail(path string, lines int) string {
	b, _ := os.ReadFile(path)
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// loadSamples are the 1-minute load averages seen over a run.
type loadSamples struct{ start, max, end float64 }

func sampleLoad(done <-chan struct{}, every time.Duration) loadSamples {
	s := loadSamples{start: loadAvg()}
	s.max = s.start
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			s.end = loadAvg()
			s.max = max(s.max, s.end)
			return s
		case <-t.C:
			s.max = max(s.max, loadAvg())
		}
	}
}

func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var l float64
	fmt.Sscanf(string(b), "%f", &l)
	return l
}

// machine says what ran it: "2 cores Intel Xeon (KVM), 24 GiB, Debian 12".
func machine() string {
	cpus, model := 0, "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "processor":
				cpus++
			case "model name":
				model = cpuName(strings.TrimSpace(v))
			}
		}
	}
	mem := "unknown memory"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
		}
	}
	osName := "unknown OS"
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		osName = osRelease(string(b))
	}
	// The virtual machine, not a container inside it: the cores are the VM's.
	if virt, err := exec.Command("systemd-detect-virt", "--vm").Output(); err == nil {
		if v := strings.TrimSpace(string(virt)); v != "" && v != "none" {
			model += " (" + strings.ToUpper(v) + ")"
		}
	}
	return fmt.Sprintf("%d cores %s, %s, %s", cpus, model, mem, osName)
}

// cpuName shortens a model name: "Intel(R) Xeon(R) Processor" → "Intel Xeon".
func cpuName(s string) string {
	for _, junk := range []string{"(R)", "(TM)", "(tm)", " Processor", " CPU"} {
		s = strings.ReplaceAll(s, junk, "")
	}
	if i := strings.Index(s, " @ "); i >= 0 {
		s = s[:i]
	}
	return strings.Join(strings.Fields(s), " ")
}

// osRelease reads NAME and VERSION_ID of os-release: "Debian 12".
func osRelease(s string) string {
	var name, version string
	for _, l := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"`)
		switch k {
		case "NAME":
			name = strings.TrimSuffix(v, " GNU/Linux")
		case "VERSION_ID":
			version = v
		}
	}
	return strings.TrimSpace(name + " " + version)
}

// row is the measurement as a row of the table.
func (m measurement) row() string {
	result := "passed"
	if m.err != nil {
		result = "**failed**"
	}
	target := ""
	if m.target != "test" {
		target = fmt.Sprintf(" (`make %s`)", m.target)
	}
	return fmt.Sprintf("| %s%s | `%s` | %s | %s | %.1f → %.1f, at most %.1f | %s | **%s** |",
		m.mode, target, m.commit, m.date.Format("2006-01-02 15:04"), m.machine,
		m.load.start, m.load.end, m.load.max, result, minutes(m.took))
}

func minutes(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
}

const (
	beginMarker = "<!-- maketesttime:begin -->"
	endMarker   = "<!-- maketesttime:end -->"
	header      = "| run | commit | date (UTC) | machine | load average (start → end, highest) | result | time |\n| --- | --- | --- | --- | --- | --- | --- |"
)

// replaceRow writes row into the table between the markers of doc, in place
// of the row of the same mode; the rows stay cold first, then warm.
func replaceRow(doc, mode, row string) (string, error) {
	i := strings.Index(doc, beginMarker)
	j := strings.Index(doc, endMarker)
	if i < 0 || j < i {
		return "", fmt.Errorf("no table between %s and %s", beginMarker, endMarker)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(doc[i+len(beginMarker):j], "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 3 {
			continue
		}
		m, _, _ := strings.Cut(strings.TrimSpace(cells[1]), " ")
		if m == "cold" || m == "warm" {
			rows[m] = l
		}
	}
	rows[mode] = row
	var b bytes.Buffer
	b.WriteString(beginMarker + "\n" + header + "\n")
	for _, m := range []string{"cold", "warm"} {
		if r, ok := rows[m]; ok {
			b.WriteString(r + "\n")
		}
	}
	return doc[:i] + b.String() + doc[j:], nil
}
