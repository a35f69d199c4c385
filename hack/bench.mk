# Performance and reliability under load (issue 5). `make bench` measures and
# writes docs/performance.md: the engine and handler benchmarks with CPU
# profiles, then the scale and fault tests (test/scale, build tag scale): a
# real kube-apiserver holding a 5,000-node fleet, `gpu-upgrade-gate serve` as
# its own process, the load generator (test/loadgen) over loopback TLS, and
# issue 14's admission phase (Plan and Job writes through the API server,
# interleaved with a plain namespace and a ValidatingAdmissionPolicy; the
# holder-read options: test/scale/admission_test.go). About 20 minutes on 2
# idle cores; it is not part of `make test`, which runs only the
# load generator's smoke run (a few seconds, correctness only) and vets the
# scale tests. Included by the top Makefile.

BENCH_DIR ?= bin/bench
BENCH_COUNT ?= 5
BENCH_ABS = $(abspath $(BENCH_DIR))

.PHONY: bench bench-engine bench-scale bench-growth bench-report loadgen-smoke

bench: ## Measure issues 5 and 28's targets and write docs/performance.md (~20 min; BENCH_DIR=bin/bench; `make bench-peers` adds the peers)
	@status=0; \
	$(MAKE) --no-print-directory bench-engine || status=$$?; \
	$(MAKE) --no-print-directory bench-scale || status=$$?; \
	$(MAKE) --no-print-directory bench-growth || status=$$?; \
	$(MAKE) --no-print-directory bench-pace || status=$$?; \
	$(MAKE) --no-print-directory bench-report || status=$$?; \
	exit $$status

bench-engine: ## Engine and handler benchmarks (-count BENCH_COUNT) and their CPU profiles
	@mkdir -p $(BENCH_DIR)
	@set -o pipefail; { echo "load-before $$(cut -d' ' -f1-3 /proc/loadavg)"; \
	  $(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) ./gate/ ./webhook/; \
	  echo "load-after $$(cut -d' ' -f1-3 /proc/loadavg)"; } | tee $(BENCH_DIR)/bench.txt
	$(GO) test -run '^$$' -bench 'PlanDecision/rke2-agent$$' -benchtime 3s -cpuprofile $(BENCH_DIR)/plan.cpu -o $(BENCH_DIR)/gate.test ./gate/ >/dev/null
	$(GO) tool pprof -top -nodecount 25 $(BENCH_DIR)/gate.test $(BENCH_DIR)/plan.cpu > $(BENCH_DIR)/plan.pprof.txt 2>/dev/null
	$(GO) test -run '^$$' -bench 'PlanDecision/select-everything$$' -benchtime 3s -cpuprofile $(BENCH_DIR)/plan-all.cpu -o $(BENCH_DIR)/gate.test ./gate/ >/dev/null
	$(GO) tool pprof -top -nodecount 25 $(BENCH_DIR)/gate.test $(BENCH_DIR)/plan-all.cpu > $(BENCH_DIR)/plan-all.pprof.txt 2>/dev/null
	$(GO) test -run '^$$' -bench 'Handler/node-relabel$$' -benchtime 3s -cpuprofile $(BENCH_DIR)/node.cpu -o $(BENCH_DIR)/webhook.test ./webhook/ >/dev/null
	$(GO) tool pprof -top -nodecount 25 $(BENCH_DIR)/webhook.test $(BENCH_DIR)/node.cpu > $(BENCH_DIR)/node.pprof.txt 2>/dev/null

bench-scale: controlplane helm ## The scale and fault tests against a real control plane (results in BENCH_DIR/scale.json)
	@mkdir -p $(BENCH_DIR)
	@set -o pipefail; GUG_SCALE_OUT=$(BENCH_ABS) $(GO) test -count=1 -tags scale -run '^TestScale$$' -timeout 60m -v ./test/scale/ 2>&1 | tee $(BENCH_DIR)/scale.log

bench-growth: controlplane helm ## The growth curve: RSS, Node reviews/s and Plan p99 at 1,000 / 5,000 / 15,000 nodes (BENCH_DIR/growth.json; GUG_SCALE_GROWTH=sizes)
	@mkdir -p $(BENCH_DIR)
	@set -o pipefail; GUG_SCALE_OUT=$(BENCH_ABS) $(GO) test -count=1 -tags scale -run TestScaleGrowth -timeout 90m -v ./test/scale/ 2>&1 | tee $(BENCH_DIR)/growth.log
	$(GO) run ./test/scale/report -dir $(BENCH_DIR) -growth -out docs/performance.md

bench-report: ## Write docs/performance.md from BENCH_DIR
	$(GO) run ./test/scale/report -dir $(BENCH_DIR) -out docs/performance.md

loadgen-smoke: controlplane helm ## The load generator for a few seconds against the webhook: correctness and zero errors only
	$(GO) test -count=1 -tags e2e -run TestSmoke -timeout 10m ./test/loadgen/...


TEST_EXTRA += loadgen-smoke

# Rollout pace (issue 28 goal 1): a wave of five fake V100 nodes under one
# Plan, the real SUC and kube-apiserver, with the gate (its Plan nudge on),
# with its nudge off, and with the gate absent (the floor); the test plays
# the kubelet and the Job controller (test/e2e/zpace_test.go, build tags e2e
# and pace). About 5 minutes; not part of `make test`. It rewrites only the
# "Rollout pace" section of docs/performance.md; bench-report renders it too
# whenever BENCH_DIR holds pace.json.
.PHONY: bench-pace
bench-pace: controlplane suc ## Proof holds → next node's Job, with the gate, without its nudge, and without the gate (BENCH_DIR/pace.json)
	@mkdir -p $(BENCH_DIR)
	@set -o pipefail; GUG_PACE_OUT=$(BENCH_ABS) $(GO) test -count=1 -tags e2e,pace -run '^TestRolloutPace$$' -timeout 30m -v ./test/e2e/ 2>&1 | tee $(BENCH_DIR)/pace.log
	$(GO) run ./test/scale/report -dir $(BENCH_DIR) -pace -out docs/performance.md
