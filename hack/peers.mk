# Issue 28 goal 2: the Plan create's added latency through one real
# kube-apiserver, this gate beside Kyverno, Gatekeeper and a
# ValidatingAdmissionPolicy, each with the same Plan rules
# (hack/tools/peers/policies). The peers are built from the Go module proxy
# (hack/tools/peers/<peer>/go.mod) into the version-keyed cache, once: a
# cold build takes 20-40 minutes on 2 cores. Not part of `make test` or
# `make bench`. Results: BENCH_DIR/peers.json, written into
# docs/performance.md by `make bench-report`. Included by the top Makefile.

KYVERNO_ARGS := peers/kyverno github.com/kyverno/kyverno github.com/kyverno/kyverno/cmd/kyverno
GATEKEEPER_ARGS := peers/gatekeeper github.com/open-policy-agent/gatekeeper/v3 github.com/open-policy-agent/gatekeeper/v3
# Recursive (=): hack/tools.mk, which sets TOOLS_BUILD, is included after this file.
KYVERNO = $(shell $(TOOLS_BUILD) $(KYVERNO_ARGS) --print-path)
GATEKEEPER = $(shell $(TOOLS_BUILD) $(GATEKEEPER_ARGS) --print-path)

.PHONY: kyverno gatekeeper bench-peers

kyverno: ## Build Kyverno's admission controller from its Go module (first time only: 20-40 min)
	@nice -n 10 $(TOOLS_BUILD) $(KYVERNO_ARGS) >/dev/null

gatekeeper: ## Build Gatekeeper's manager from its Go module (first time only: 20-40 min)
	@nice -n 10 $(TOOLS_BUILD) $(GATEKEEPER_ARGS) >/dev/null

# A peer that does not build is measured as absent (peers.json says why);
# the gate, the VAP and the plain namespace are measured either way. Then
# the issue 28 block of docs/performance.md is refreshed from BENCH_DIR
# (goals beside their figures; `make bench-report` writes it with the rest).
bench-peers: controlplane helm ## The gate beside Kyverno, Gatekeeper and a VAP, Plan creates through one kube-apiserver (BENCH_DIR/peers.json; ~10 min once built)
	@mkdir -p $(BENCH_DIR)
	-@$(MAKE) --no-print-directory kyverno
	-@$(MAKE) --no-print-directory gatekeeper
	@set -o pipefail; echo "load-before $$(cut -d' ' -f1-3 /proc/loadavg)" | tee $(BENCH_DIR)/peers.log; \
	  GUG_SCALE_OUT=$(BENCH_ABS) \
	  GUG_PEERS_KYVERNO=$(KYVERNO) GUG_PEERS_KYVERNO_SRC=$$(cd hack/tools/peers/kyverno && $(GO) list -m -f '{{.Dir}}' github.com/kyverno/kyverno) \
	  GUG_PEERS_GATEKEEPER=$(GATEKEEPER) GUG_PEERS_GATEKEEPER_SRC=$$(cd hack/tools/peers/gatekeeper && $(GO) list -m -f '{{.Dir}}' github.com/open-policy-agent/gatekeeper/v3) \
	  $(GO) test -count=1 -tags scale -run '^TestScalePeers$$' -timeout 40m -v ./test/scale/ 2>&1 | tee -a $(BENCH_DIR)/peers.log
	$(GO) run ./test/scale/report -dir $(BENCH_DIR) -out docs/performance.md -splice
