# The chart's alerts and dashboard, checked with Prometheus's own code in
# the tools module hack/tools/promtool (prometheus/prometheus and
# prometheus-operator's API types stay out of the main module): the
# PrometheusRule decoded with its real type, every alert and dashboard query
# parsed and its metric names checked against webhook/testdata/metrics.txt,
# and test/alerts/alerts.test.yaml (promtool's `test rules` format) run
# with the PromQL engine, rulefmt and Prometheus's alert templates (not the
# rules and tsdb packages, which import every cloud's SDK: see
# hack/tools/promtool/ruletest_test.go). GUG_PROMTOOL=<promtool binary> also
# runs that file with promtool itself. Included by the top Makefile.

.PHONY: alert-tests

alert-tests: helm ## The alerts' unit tests, the PrometheusRule and the dashboard queries (Prometheus's parser and PromQL engine)
	cd hack/tools/promtool && $(GO) vet . && GUG_PROMTOOL=$(GUG_PROMTOOL) $(GO) test -count=1 .

TEST_EXTRA += alert-tests

# promtool itself, optional (not part of `make test`: it links every
# service discovery and remote-write client, a cold build of 35 minutes on a
# loaded 2-core machine). `make alert-tests GUG_PROMTOOL=$(make -s promtool)`
# runs the alert tests with it too.
PROMTOOL_ARGS := promtool github.com/prometheus/prometheus github.com/prometheus/prometheus/cmd/promtool

.PHONY: promtool

promtool: ## Build promtool from its Go module (optional; first time only: long) and print its path
	@$(TOOLS_BUILD) $(PROMTOOL_ARGS)
