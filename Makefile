# kube-node-ready — the front door. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

MODULE  := github.com/kube-node-ready/kube-node-ready
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X $(MODULE)/internal/version.Version=$(VERSION) -X $(MODULE)/internal/version.Commit=$(COMMIT)
BIN     := $(CURDIR)/bin
GO      ?= go
# Packages whose tests need the real control plane carry the e2e build tag.
E2E_PKGS ?= ./test/...
E2E_TIMEOUT ?= 20m

export KNR_BIN_DIR := $(BIN)

.PHONY: help
help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

.PHONY: build
build: ## build the agent and webhook binaries into bin/
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/kube-node-ready-agent ./agent
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/kube-node-ready-webhook ./webhook

.PHONY: tools
tools: ## build pinned etcd, kube-apiserver, kubectl, CoreDNS, helm into bin/; apt-get promtool, hey, iproute2
	./test/tools/build.sh

.PHONY: test
test: tools build unit e2e ## everything CI runs: unit tests (-race), then e2e against the real control plane

.PHONY: unit
unit: ## unit tests with the race detector
	$(GO) test -race -count=1 ./...

.PHONY: e2e
e2e: tools build ## tests against a real etcd + kube-apiserver + CoreDNS
	$(GO) test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) -p 1 $(E2E_PKGS)

.PHONY: lint
lint: ## go vet and gofmt
	$(GO) vet ./...
	$(GO) vet -tags e2e ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: demo
demo: tools build ## run the local control plane with simulated nodes until Ctrl-C
	$(GO) run ./test/demo

.PHONY: bench
bench: tools build ## benchmarks; results go to docs/benchmarks.md
	$(GO) test -tags e2e -run '^$$' -bench . -benchtime 1x -count 1 -timeout 60m ./test/bench/...

.PHONY: images
images: ## container images (needs a running container engine)
	@if ! docker info >/dev/null 2>&1; then echo "make images: no container engine is running here (docker info failed); nothing built"; exit 1; fi
	docker build -f Dockerfile.agent --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t kube-node-ready-agent:$(VERSION) .
	docker build -f Dockerfile.webhook --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t kube-node-ready-webhook:$(VERSION) .

.PHONY: clean
clean: ## remove built binaries and tools
	rm -rf $(BIN)
