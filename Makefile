# gpu-upgrade-gate. `make demo` and `make test` are the README's two set-up
# commands: everything they need (etcd, kube-apiserver) is built here from Go
# modules, once, into a cache outside the clone.

SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
FUZZTIME ?= 30s
ARGS ?=
.DEFAULT_GOAL := all

# Fragments add their own targets; a fragment that belongs in `make test`
# appends it to TEST_EXTRA.
TEST_EXTRA :=
include $(sort $(wildcard hack/*.mk))

.PHONY: all build test unit e2e demo fuzz lint fmt help

all: build

help: ## Show the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## Build bin/gpu-upgrade-gate (static, trimmed; the Dockerfile uses the same flags)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/gpu-upgrade-gate ./cmd/gpu-upgrade-gate

# One vet and one staticcheck pass over every file: the build tags only add
# files (none is excluded by a tag), and each tag set is a pass of its own
# over all ~860 dependencies' vet facts (about 80 s on a fresh machine).
LINT_TAGS := e2e,scale

lint: staticcheck ## gofmt, go vet and staticcheck (every file: the e2e and scale build tags too)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags $(LINT_TAGS) ./...
	$(STATICCHECK) -tags $(LINT_TAGS) ./...

# The benchmarks run once in the same pass as the tests, so none rots: a
# second pass linked the gate's and webhook's test binaries again (~20 s of
# a fresh machine's make test).
unit: ## Unit, golden and fuzz-seed tests (no cluster); every benchmark once, so none rots
	$(GO) test -count=1 -bench . -benchtime 1x ./...

e2e: controlplane ## End-to-end tests against a real kube-apiserver and etcd
	$(GO) test -count=1 -tags e2e -timeout 20m ./internal/controlplane/ ./test/e2e/ ./cmd/gpu-upgrade-gate/

test: neighbours-background lint unit e2e $(TEST_EXTRA) ## Everything CI runs

demo: controlplane ## Real control plane, webhook and SUC: unsafe Plans refused, a safe wave proven node by node (ARGS=--once to exit)
	$(GO) run ./test/demo $(ARGS)

fuzz: ## Fuzz every target for FUZZTIME each (default 30s)
	@set -e; for pkg in ./gate ./qualification ./webhook; do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f ($(FUZZTIME))"; $(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME); \
	  done; \
	done
