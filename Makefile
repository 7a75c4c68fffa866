# kube-node-ready — the front door. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

# The Go toolchain that builds and tests this module, fetched by the go
# command from the module proxy on first use (the machine's own Go only
# starts it): Go 1.26.8's standard library has vulnerabilities this code
# reaches, fixed later (`make vuln`). .ci/run exports the same, and the test
# tools build with it too (test/tools/build.sh says why).
export GOTOOLCHAIN := go1.27.3

MODULE  := github.com/kube-node-ready/kube-node-ready
# One version for the binaries (--version), the image tags, the kubectl plugin
# and the chart (whose Chart.yaml TestChartCarriesVERSION keeps equal to it):
# the VERSION file; `make VERSION=x.y.z` overrides it, a VERSION environment
# variable does not.
VERSION := $(strip $(file < VERSION))
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X $(MODULE)/internal/version.Version=$(VERSION) -X $(MODULE)/internal/version.Commit=$(COMMIT)
BIN     := $(CURDIR)/bin
GO      ?= go
# Packages whose tests need the real control plane carry the e2e build tag.
# `make e2e` runs them in eight streams side by side, each package in a
# stream after the other; the streams' output is printed as they end. Their
# tests mostly wait (on agents' rounds, timers, garbage collection), but
# eight streams keep both cores busy. The first four streams hold the
# packages that start real nodes (kubelet, containerd, kube-proxy), so at
# most E2E_REAL_NODE_CLUSTERS clusters of them run at once (the harness's
# host-wide slots); each test binary's control plane lives in a network
# namespace of its own. In each stream the longest package comes first, but
# a package that needs one of the later tools (KWOK, Karpenter,
# kube-network-policies, cert-manager: see test) after those that need none,
# since make test builds them beside the first packages. E2E_STREAM8 also
# takes, last, every package the others do not name. A ninth stream (the
# recipe runs up to nine; an empty one is skipped), balanced so that all
# ended together, kept the load at 20-35 instead of 15-20 and tripped tests'
# waits that eight did not (docs/benchmarks-history-2026.md).
E2E_STREAM1 ?= ./test/e2e/install/... ./test/e2e/externalnames/... ./test/e2e/gitops/... ./test/e2e/netpol/...
E2E_STREAM2 ?= ./test/e2e/outofservice/... ./test/e2e/installipv6/... ./test/e2e/monitoring/... ./test/e2e/certmanager/...
E2E_STREAM3 ?= ./test/e2e/lifecycle/... ./test/e2e/faults/...
E2E_STREAM4 ?= ./test/e2e/upgrade/... ./test/harness/...
E2E_STREAM5 ?= ./test/e2e/agent/... ./test/e2e/agentdualstack/... ./test/e2e/clientca/... ./test/e2e/fleet/...
E2E_STREAM6 ?= ./test/e2e/release/... ./test/e2e/webhook/... ./test/e2e/karpenter/...
E2E_STREAM7 ?= ./test/e2e/remediation/... ./test/e2e/agentipv6/... ./test/e2e/startuptaint/... ./test/e2e/kubectlplugin/...
E2E_STREAM8_NAMED := ./test/e2e/cleanup/... ./test/e2e/kustomize/... ./test/e2e/nrc/... ./test/e2e/chart/...
E2E_STREAM8 ?= $(E2E_STREAM8_NAMED) $(filter-out $(foreach i,1 2 3 4 5 6 7 9,$(E2E_STREAM$(i))) $(E2E_STREAM8_NAMED),$(patsubst %/,%/...,$(wildcard ./test/e2e/*/)))
E2E_STREAM9 ?=
# The real-node streams' clusters at once, one slot each. A cluster of real
# nodes holds about 9 inotify instances per node (kubelet 6, containerd 2,
# kube-proxy 1) and 8 for its control plane, up to 64 here (install, 5
# nodes at once): e2e-streams raises the host's
# fs.inotify.max_user_instances to 64 per slot when it is lower (the
# kernel's default, 128, holds two; the harness refuses to start a cluster
# that could run out).
E2E_REAL_NODE_CLUSTERS ?= 4
# A package's whole time: in a cold make test it includes the wait for a later
# tool (up to harness.LaterTool's 30 minutes). At 20m test/e2e/karpenter,
# waiting 15 minutes for Karpenter from the start of the streams, timed out
# 5 minutes into its tests (96c00dc).
E2E_TIMEOUT ?= 40m
E2E_NSTREAMS := $(words $(foreach i,1 2 3 4 5 6 7 8 9,$(if $(strip $(E2E_STREAM$(i))),$(i))))
# make test starts the unit tests and fuzzing once at most this many e2e
# streams are still running (e2e-streams adds a line to bin/logs/e2e-ended as
# each one ends): see test.
UNIT_AT_STREAMS_LEFT ?= 1
# go vet, staticcheck and the e2e tests compile as the binaries and the test
# tools do (no cgo, -trimpath), so client-go and the rest compile once for all
# of them; with the Go defaults they compiled everything a second time. The
# GOFLAGS of the environment or of `go env -w` are kept: builds the tests
# start (make release in test/e2e/release) must match make images'. The unit
# tests' -race needs cgo and compiles its own. Test binaries link without
# DWARF (-ldflags=-w: a third less link time; panics still name functions and
# lines): a make test links about 90 of them.
SHARED_BUILD := CGO_ENABLED=0 GOFLAGS="-trimpath $$($(GO) env GOFLAGS)"
# The compiler, the linker, go vet, staticcheck and govulncheck run with
# GOGC=400 (BUILD_GOGC; test/tools/lib.sh sets the same for the tools): on 2
# cores, building the agent, the webhook and the plugin from an empty cache
# took 13 % less CPU (user+sys 292 -> 253 s, wall 149 -> 129 s, median of
# two, side by side) for 14 % more peak memory (768 -> 875 MB); a cold make
# test is mostly compiling (62 % of its CPU), though in one whole cold run the
# gain stayed within the spread between runs (docs/benchmarks.md). The unit
# tests and fuzzing run with it too; the e2e tests, the benchmarks and the
# demo do not: what they start runs with Go's default.
BUILD_GOGC ?= 400
BUILD_GC := GOGC=$(BUILD_GOGC)

export KNR_BIN_DIR := $(BIN)

.PHONY: help
help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

.PHONY: build
build: ## build the agent, webhook and kubectl plugin binaries into bin/
	$(BUILD_GC) CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/kube-node-ready-agent ./agent
	$(BUILD_GC) CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/kube-node-ready-webhook ./webhook
	$(BUILD_GC) CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/kubectl-node_ready ./kubectl-node_ready

# The kubectl plugin's release: one archive per platform (the binary, and
# LICENSE when there is one; reproducible: sorted, owner 0, commit time) and
# the krew manifest rendered from plugins/krew/node-ready.yaml.tmpl with the
# archives' sha256. KREW_URI is where the archives are published.
DIST           := $(CURDIR)/dist
DIST_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
KREW_URI       ?= https://github.com/kube-node-ready/kube-node-ready/releases/download/v$(VERSION)

.PHONY: dist
dist: ## kubectl plugin release: dist/kubectl-node_ready_<os>_<arch>.tar.gz and the krew manifest dist/node-ready.yaml
	mkdir -p $(DIST)
	rm -rf $(DIST)/kubectl-node_ready_* $(DIST)/node-ready.yaml
	for p in $(DIST_PLATFORMS); do \
		d=$(DIST)/kubectl-node_ready_$${p%/*}_$${p#*/}; mkdir -p $$d; files=(kubectl-node_ready); \
		$(BUILD_GC) CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $$d/kubectl-node_ready ./kubectl-node_ready; \
		if [[ -f LICENSE ]]; then cp LICENSE $$d/; files+=(LICENSE); fi; \
		tar $(REPRO_TAR) -C $$d -cf - "$${files[@]}" | gzip -n > $$d.tar.gz; \
		rm -rf $$d; \
	done
	plugins/krew/render.sh '$(VERSION)' '$(KREW_URI)' $(DIST) > $(DIST)/node-ready.yaml.tmp
	mv $(DIST)/node-ready.yaml.tmp $(DIST)/node-ready.yaml
	@ls -l $(DIST)

.PHONY: tools
tools: ## build the pinned control plane, kubelet, kube-proxy, containerd, CoreDNS, Prometheus and promtool, cert-manager (controller, CA injector), KWOK, Karpenter (KWOK provider), kube-network-policies, helm, staticcheck, the CRDs and test images into bin/; apt-get runc, CNI plugins, iptables, conntrack, hey
	./test/tools/build.sh

# tools-first builds what every e2e package needs (test/tools/build.sh first);
# make test builds the rest while the e2e tests run.
.PHONY: tools-first
tools-first:
	./test/tools/build.sh first

# make test builds the tools every e2e package needs, then compiles what the
# e2e packages import once (go vet: from empty caches, eight streams starting
# at once would each compile client-go and the rest again, side by side),
# then starts the e2e streams (mostly waiting on the clusters they start) at
# once. Beside them, at the idle scheduling priority (SCHED_IDLE), it builds
# the later tools (KWOK, Karpenter, kube-network-policies, cert-manager,
# staticcheck: test/tools/build.sh later), then runs lint and govulncheck:
# they take the cores only when the e2e tests leave them idle, so the tests'
# timing is what it is without them. bin/.tools-later holds this recipe's
# process ID while the later tools build, and a test that needs one waits for
# it (harness.LaterTool); a failed build is written there and fails those
# tests with its log. The unit tests and fuzzing start when at most one
# stream is left (UNIT_AT_STREAMS_LEFT), at the normal priority: the unit
# tests' DNS servers answer within real deadlines, which a process at the
# idle priority beside eight busy streams misses (warm runs failed so), but
# beside one stream the cores have room. In a cold run the last stream,
# test/e2e/karpenter, waits for the later tools and then mostly on
# Karpenter's and the agents' rounds: the cores were 95 % idle for minutes
# while the unit tests waited for it. Every part runs to its end (make -k)
# and any failure fails the target.
.PHONY: test
test: tools-first build images ## everything CI runs: lint, govulncheck, unit tests (-race), bounded fuzzing, e2e against the real control plane and real nodes
	@mkdir -p $(BIN)/logs
	@echo "== compiling what the e2e packages import, once (go vet -tags e2e ./...; make lint reports its findings)"
	$(BUILD_GC) $(SHARED_BUILD) $(GO) vet -tags e2e ./... >$(BIN)/logs/vet-first.log 2>&1 || true
	echo $$$$ >$(BIN)/.tools-later; \
	( laterrc=0; \
	  if chrt --idle 0 ./test/tools/build.sh later >$(BIN)/logs/tools-later.log 2>&1; then rm -f $(BIN)/.tools-later; \
	  else laterrc=1; echo "failed: see $(BIN)/logs/tools-later.log" >$(BIN)/.tools-later; fi; \
	  chrt --idle 0 $(MAKE) --no-print-directory -k lint vuln >$(BIN)/logs/go-checks.log 2>&1 || laterrc=1; \
	  exit $$laterrc ) & checks=$$!; \
	rm -f $(BIN)/logs/e2e-ended; \
	$(MAKE) --no-print-directory e2e-streams & e2e=$$!; \
	( until (( $$(cat $(BIN)/logs/e2e-ended 2>/dev/null | wc -l) + $(UNIT_AT_STREAMS_LEFT) >= $(E2E_NSTREAMS) )) || ! kill -0 $$e2e 2>/dev/null; do sleep 2; done; \
	  $(MAKE) --no-print-directory -k unit fuzz >$(BIN)/logs/unit.log 2>&1 ) & unit=$$!; \
	e2erc=0; wait $$e2e || e2erc=$$?; \
	unitrc=0; wait $$unit || unitrc=$$?; \
	echo "== the unit tests and fuzzing, once at most $(UNIT_AT_STREAMS_LEFT) e2e stream was left:"; cat $(BIN)/logs/unit.log; \
	checksrc=0; wait $$checks || checksrc=$$?; \
	echo "== the later tools, built beside the e2e tests:"; cat $(BIN)/logs/tools-later.log; \
	echo "== lint and govulncheck, beside the e2e tests:"; cat $(BIN)/logs/go-checks.log; \
	if ((checksrc)); then echo "== building the later tools, lint or govulncheck FAILED (above)"; fi; \
	if ((unitrc)); then echo "== the unit tests or fuzzing FAILED (above)"; fi; \
	exit $$(( e2erc || checksrc || unitrc ))

# The unit tests are hermetic (client-go fakes, a fake clock, servers of
# their own on loopback), so Go's test cache keeps a package's passing result
# until its code, the files its tests open or the environment variables they
# read change: a second make test reruns what a change touched. A test that
# hands a file to a child process opens it itself, so a change reruns it
# (internal/kubectlplugin's krew test). UNIT_FLAGS=-count=1 reruns them all;
# the e2e tests always run (-count=1): what they test, the cache cannot see.
UNIT_FLAGS ?=

.PHONY: unit
unit: ## unit tests with the race detector (Go's test cache reruns what changed; UNIT_FLAGS=-count=1 for all)
	$(BUILD_GC) $(GO) test -race -ldflags=-w $(UNIT_FLAGS) ./...

.PHONY: e2e
e2e: tools build images ## tests against the real control plane and real nodes (kubelet, containerd, kube-proxy), in eight streams side by side
	@$(MAKE) --no-print-directory e2e-streams

# e2e without its prerequisites, for make test, which has built them.
.PHONY: e2e-streams
e2e-streams:
	@mkdir -p $(BIN)/logs
	@want=$$(( $(E2E_REAL_NODE_CLUSTERS) * 64 )); have=$$(cat /proc/sys/fs/inotify/max_user_instances); \
	if (( have < want )); then \
		echo "fs.inotify.max_user_instances: $$have -> $$want, for $(E2E_REAL_NODE_CLUSTERS) clusters of real nodes at once"; \
		echo $$want > /proc/sys/fs/inotify/max_user_instances; \
	fi
	@streams=($(foreach i,1 2 3 4 5 6 7 8 9,"$(E2E_STREAM$(i))")); pids=(); : >$(BIN)/logs/e2e-ended; \
	for i in "$${!streams[@]}"; do \
		if [[ -z "$${streams[$$i]// }" ]]; then pids+=(""); continue; fi; \
		echo "e2e stream $$((i+1)): $${streams[$$i]}"; \
		( KNR_REAL_NODE_CLUSTERS=$(E2E_REAL_NODE_CLUSTERS) $(SHARED_BUILD) $(GO) test -tags e2e -ldflags=-w -count=1 -timeout $(E2E_TIMEOUT) -p 1 $${streams[$$i]}; \
		  rc=$$?; echo "$$((i+1))" >>$(BIN)/logs/e2e-ended; exit $$rc ) >$(BIN)/logs/e2e-$$((i+1)).log 2>&1 & pids+=($$!); \
	done; \
	rc=0; for i in "$${!pids[@]}"; do \
		[[ -n "$${pids[$$i]}" ]] || continue; \
		status=passed; wait $${pids[$$i]} || { rc=1; status=FAILED; }; \
		echo "== e2e stream $$((i+1)) $$status: $${streams[$$i]}"; cat $(BIN)/logs/e2e-$$((i+1)).log; \
	done; \
	exit $$rc

# The e2e tag only adds files (none is built only without it), so one pass
# with it covers every package.
.PHONY: lint
lint: ## go vet, staticcheck (pinned in test/tools/staticcheck, built into bin/ unless there) and gofmt
	./test/tools/staticcheck/build.sh
	$(BUILD_GC) $(SHARED_BUILD) $(GO) vet -tags e2e ./...
	$(BUILD_GC) $(SHARED_BUILD) $(BIN)/staticcheck -tags e2e ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# govulncheck reports the known vulnerabilities that the project's code
# reaches, in the modules go.mod pins and the standard library of the Go that
# runs it. The database is the one pinned in test/tools/vulndb (served by the
# module proxy), so the check runs offline and its answer moves only with that
# pin; bump it to learn of newer reports.
.PHONY: vuln
vuln: ## govulncheck (pinned in test/tools/govulncheck) against the vulnerability database pinned in test/tools/vulndb, offline
	./test/tools/govulncheck/build.sh
	@test -f $(BIN)/vulndb/index/db.json || { echo "make vuln: no vulnerability database in $(BIN)/vulndb"; exit 1; }
	$(BUILD_GC) $(BIN)/govulncheck -db file://$(BIN)/vulndb -tags e2e ./...

# Each fuzz target runs for FUZZTIME on top of its seed corpus
# (testdata/fuzz/<target>/); a crasher is written there and fails the run.
FUZZTIME ?= 10s
FUZZ_TARGETS := ./internal/api:FuzzParseConditionMessage ./internal/api:FuzzParseCleanupStatus ./internal/webhook/admission:FuzzReview ./internal/agent/checks/dnsquery:FuzzParseResolvConf ./internal/agent/checks/dnsquery:FuzzAnswer

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME (10s)
	for t in $(FUZZ_TARGETS); do \
		$(BUILD_GC) $(GO) test -ldflags=-w -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) "$${t%:*}" || exit 1; \
	done

.PHONY: demo
demo: tools build images ## helm install into a local cluster of real nodes and tell the story; Ctrl-C stops and cleans up
	$(GO) run ./hack/demo

# The fleet-scale benchmark (test/bench/fleet) runs from bench-scale only: at
# FLEET_NODES nodes it takes most of an hour and most of the machine.
BENCH_PKGS ?= $(filter-out ./test/bench/fleet/,$(wildcard ./test/bench/*/))
FLEET_NODES ?= 10000
# A 1-minute measuring window and 20 restarted pods keep a run at 2 000 nodes
# within 30 minutes on 2 cores; the figures of docs/benchmarks.md at 10 000
# used -fleet.window=2m.
FLEET_ARGS ?= -fleet.window=1m -fleet.rollout=20
# The simulated fleet's soft memory limit (Go's GOMEMLIMIT; the control
# plane's processes inherit it but stay far below): 10 000 agents hold about
# 7.5 GiB, and without a limit the collector lets the heap grow to twice that
# beside kube-apiserver's 7 GiB.
FLEET_MEMLIMIT ?= 14GiB
# Where bench-scale keeps each benchmark's output for its table of targets.
BENCH_SCALE_OUT ?= /tmp/knr-bench-scale

.PHONY: bench
bench: tools build images ## benchmarks; results go to docs/benchmarks.md
	$(GO) test -tags e2e -run '^$$' -bench . -benchtime 1x -count 1 -timeout 60m $(BENCH_PKGS)

# Each benchmark's output is kept (a failing one does not stop the others),
# and the last step prints the targets as one table, met or missed
# (hack/benchtable), with the run's own duration.
.PHONY: bench-scale
bench-scale: tools build ## the fleet-scale benchmarks at FLEET_NODES (default 10000) KWOK nodes with a simulated agent on each (more flags in FLEET_ARGS): the fleet's steady state, a DNS outage and its recovery, a node joining beside 100 to FLEET_NODES agents, kubectl node-ready status, the webhook cleaning up 1000 deleted at once, back-filling and caching FLEET_NODES cloud-shaped nodes, its remediation scans; prints the targets met or missed; results go to docs/benchmarks.md
	@rm -rf $(BENCH_SCALE_OUT) && mkdir -p $(BENCH_SCALE_OUT) && date +%s > $(BENCH_SCALE_OUT)/start
	-GOMEMLIMIT=$(FLEET_MEMLIMIT) $(GO) test -tags e2e -run '^$$' -bench 'BenchmarkFleet$$' -benchtime 1x -count 1 -timeout 180m ./test/bench/fleet/ -args -fleet.nodes=$(FLEET_NODES) $(FLEET_ARGS) 2>&1 | tee $(BENCH_SCALE_OUT)/fleet.txt
	-$(GO) test -tags e2e -run '^$$' -bench 'BenchmarkJoinSlope$$' -benchtime 1x -count 1 -timeout 30m ./test/bench/fleet/ -args -fleet.join-sizes=$(shell echo 100 1000 2000 $(FLEET_NODES) | tr ' ' '\n' | sort -nu | awk '$$1 <= $(FLEET_NODES)' | paste -sd,) 2>&1 | tee $(BENCH_SCALE_OUT)/join.txt
	-$(GO) test -tags e2e -run '^$$' -bench 'BenchmarkFleetStatus$$' -benchtime 1x -count 1 -timeout 30m ./test/bench/fleet/ -args -fleet.nodes=$(FLEET_NODES) 2>&1 | tee $(BENCH_SCALE_OUT)/status.txt
	-$(GO) test -tags e2e -run '^$$' -bench 'BenchmarkCleanup$$' -benchtime 1x -count 1 -timeout 90m ./test/bench/cleanup/ -args -cleanup.burst=1000 2>&1 | tee $(BENCH_SCALE_OUT)/cleanup.txt
	-$(GO) test -tags e2e -run '^$$' -bench 'BenchmarkWebhookMemory$$' -benchtime 1x -count 1 -timeout 90m ./test/bench/cleanup/ -args -cleanup.cache-nodes=$(FLEET_NODES) 2>&1 | tee $(BENCH_SCALE_OUT)/memory.txt
	-$(GO) test -tags e2e -run '^$$' -bench 'BenchmarkRemediationScan$$' -benchtime 1x -count 1 -timeout 30m ./test/bench/cleanup/ -args -cleanup.cache-nodes=$(FLEET_NODES) 2>&1 | tee $(BENCH_SCALE_OUT)/scan.txt
	@$(GO) run ./hack/benchtable -nodes $(FLEET_NODES) -start $$(cat $(BENCH_SCALE_OUT)/start) $(BENCH_SCALE_OUT)/*.txt $(wildcard $(BENCH_BESIDE))

# The agent beside the kubelet on real nodes (BenchmarkAgentBesideKubelet,
# about 40 minutes, longer than bench-scale may take) runs on its own; its
# output stays in BENCH_BESIDE, where bench-scale's table reads its columns.
BENCH_BESIDE ?= $(BIN)/bench-beside.txt

.PHONY: bench-beside
bench-beside: tools build images ## the agent's API server cost beside the kubelet's on 4 real nodes, kubelet default timings (about 40 min); bench-scale's table reads its output (BENCH_BESIDE)
	$(GO) test -tags e2e -run '^$$' -bench 'BenchmarkAgentBesideKubelet$$' -benchtime 1x -count 1 -timeout 60m ./test/bench/realnode/ \
		-args -realnode.nodes=4 -realnode.kubelet-timings=default -realnode.beside-identity=8m -realnode.beside-rounds=5 -realnode.beside-window=90s 2>&1 | tee $(BENCH_BESIDE).new
	mv $(BENCH_BESIDE).new $(BENCH_BESIDE)

.PHONY: manifests
manifests: tools ## render the chart into manifests/: kustomize base, a component and overlay per option, uninstall, kube-node-ready.yaml
	$(GO) run ./hack/manifestgen/cmd/manifestgen -helm $(BIN)/helm -chart charts/kube-node-ready -out manifests

.PHONY: chart-docs
chart-docs: ## rewrite the values table of the chart README from values.yaml
	$(GO) run ./hack/chartdoc

.PHONY: flag-docs
flag-docs: ## rewrite the flag tables of docs/ from the agent's and the webhook's flags
	$(GO) run ./hack/flagdoc

# Images are built without a container engine or a registry: knr-image
# (hack/images, go-containerregistry) wraps the static binaries in
# one-layer OCI images, one per platform, under one index. The Dockerfiles
# describe the same image for people who build with Docker.
IMAGE_REGISTRY ?= ghcr.io/kube-node-ready
IMAGE_TAG      ?= $(VERSION)
IMAGE_NAMES    := kube-node-ready-agent kube-node-ready-webhook
PLATFORMS      ?= linux/amd64 linux/arm64
PUSH           ?=
# Where the images (IMAGES_DIR) and their per-platform binaries
# (PLATFORM_BIN/<os>-<arch>/) go; make release points both into its own tree.
IMAGES_DIR     ?= $(BIN)/images
PLATFORM_BIN   ?= $(BIN)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# tar flags for archives whose bytes depend only on their files: sorted
# entries, root-owned, dated the commit, modes independent of the umask.
REPRO_TAR := --sort=name --owner=0 --group=0 --numeric-owner --mode=u+rwX,go+rX,go-w --mtime=@$(SOURCE_DATE_EPOCH)

.PHONY: images
images: ## OCI images of agent and webhook (amd64+arm64) as bin/images/*.tar; PUSH=registry/repo also pushes
	@test -r /etc/ssl/certs/ca-certificates.crt || { echo "make images: /etc/ssl/certs/ca-certificates.crt missing: apt-get install ca-certificates"; exit 1; }
	cd hack/images && $(BUILD_GC) CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/knr-image .
	mkdir -p $(IMAGES_DIR)
	for p in $(PLATFORMS); do \
		$(BUILD_GC) CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(PLATFORM_BIN)/$${p%/*}-$${p#*/}/kube-node-ready-agent ./agent; \
		$(BUILD_GC) CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(PLATFORM_BIN)/$${p%/*}-$${p#*/}/kube-node-ready-webhook ./webhook; \
	done
	for img in $(IMAGE_NAMES); do \
		bins=(); for p in $(PLATFORMS); do bins+=(--binary "$$p=$(PLATFORM_BIN)/$${p%/*}-$${p#*/}/$$img"); done; \
		SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/knr-image --ref $(IMAGE_REGISTRY)/$$img:$(IMAGE_TAG) "$${bins[@]}" \
			--ca-bundle /etc/ssl/certs/ca-certificates.crt \
			--label org.opencontainers.image.source=https://github.com/kube-node-ready/kube-node-ready \
			--label org.opencontainers.image.version=$(VERSION) \
			--label org.opencontainers.image.revision=$(COMMIT) \
			--label org.opencontainers.image.title=$$img \
			--out $(IMAGES_DIR)/$$img.tar $(if $(PUSH),--push $(PUSH)/$$img); \
	done

# A release: everything published for VERSION, offline, into RELEASE_DIR —
# both images as OCI archives with an SPDX SBOM each, the chart packaged, the
# rendered manifests/, the kubectl plugin archives and krew manifest, and
# SHA256SUMS. The chart is packaged and rendered from a copy that carries
# VERSION. Same commit, same bytes: -trimpath binaries, archives dated
# SOURCE_DATE_EPOCH (the commit time), helm's entry times fixed by releasegen.
RELEASE_DIR  ?= $(DIST)/release/$(VERSION)
RELEASE_WORK := $(RELEASE_DIR)/.work
CHART        := kube-node-ready

.PHONY: release
release: ## everything a release publishes, offline and reproducibly, into dist/release/VERSION (RELEASE_DIR=...)
	@[[ '$(VERSION)' =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]] || { echo "make release: VERSION=$(VERSION) is not a semantic version x.y.z"; exit 1; }
	@test -x $(BIN)/helm || { echo "make release: $(BIN)/helm missing: run make tools"; exit 1; }
	@if [[ -n "$$(ls -A '$(RELEASE_DIR)' 2>/dev/null)" && ! -e '$(RELEASE_DIR)/SHA256SUMS' && ! -e '$(RELEASE_WORK)' ]]; then \
		echo "make release: $(RELEASE_DIR) holds files and no release: not replacing it, pick another RELEASE_DIR"; exit 1; fi
	rm -rf $(RELEASE_DIR)
	mkdir -p $(RELEASE_WORK)
	$(BUILD_GC) $(GO) build -o $(RELEASE_WORK)/releasegen ./hack/releasegen/cmd/releasegen
	$(MAKE) --no-print-directory images IMAGES_DIR=$(RELEASE_WORK)/images PLATFORM_BIN=$(RELEASE_WORK) PUSH=
	for img in $(IMAGE_NAMES); do \
		mv $(RELEASE_WORK)/images/$$img.tar $(RELEASE_DIR)/$$img-$(VERSION).oci.tar; \
		bins=(); for p in $(PLATFORMS); do bins+=(--binary "$$p=$(RELEASE_WORK)/$${p%/*}-$${p#*/}/$$img"); done; \
		SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(RELEASE_WORK)/releasegen sbom --name $$img --version $(VERSION) "$${bins[@]}" > $(RELEASE_DIR)/$$img-$(VERSION).spdx.json; \
	done
	$(MAKE) --no-print-directory dist DIST=$(RELEASE_DIR)
	cp -R charts/$(CHART) $(RELEASE_WORK)/chart
	sed -i -E 's/^version: .*/version: $(VERSION)/; s/^appVersion: .*/appVersion: "$(VERSION)"/' $(RELEASE_WORK)/chart/Chart.yaml
	$(BIN)/helm package $(RELEASE_WORK)/chart -d $(RELEASE_DIR)
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(RELEASE_WORK)/releasegen chart $(RELEASE_DIR)/$(CHART)-$(VERSION).tgz
	$(GO) run ./hack/manifestgen/cmd/manifestgen -helm $(BIN)/helm -chart $(RELEASE_WORK)/chart -out $(RELEASE_WORK)/manifests
	cp manifests/README.md $(RELEASE_WORK)/manifests/
	tar $(REPRO_TAR) -C $(RELEASE_WORK) -cf - manifests | gzip -n > $(RELEASE_DIR)/$(CHART)-manifests-$(VERSION).tar.gz
	rm -rf $(RELEASE_WORK)
	cd $(RELEASE_DIR) && LC_ALL=C sha256sum -- * > SHA256SUMS
	@echo "release $(VERSION) in $(RELEASE_DIR):"; ls -l $(RELEASE_DIR)

.PHONY: clean
clean: ## remove built binaries and tools
	rm -rf $(BIN)
