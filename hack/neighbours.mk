# The real neighbours (issue 11): nfd-master v0.19.0 and cert-manager v1.21.1
# (controller, cainjector), built by hack/neighbours.sh from the source
# archives in the workplace's shared/thirdparty folder into a version-keyed
# cache outside the clone (first time only: about 15 minutes of compile on 2
# loaded cores, nfd-master most of it; cached afterwards), and the e2e suite
# that runs them next to the gate (test/neighbours: a real `helm install`,
# cert-manager issuance, injection and renewals, nfd-master with the chart's
# NodeFeatureRule). Where the archives are absent the script says so and the
# suite skips. Included by the top Makefile.

NEIGHBOURS_SH := $(dir $(lastword $(MAKEFILE_LIST)))neighbours.sh

.PHONY: neighbours neighbours-background neighbours-e2e

neighbours: ## Build nfd-master and cert-manager from ../shared/thirdparty (first time only: ~15 min)
	@$(NEIGHBOURS_SH)

# A first `make test` builds the neighbours in the background, at a lower
# priority, from its start: the rest of the run leaves cores idle (links,
# tests waiting on their API servers) that the build fills, and the
# neighbours' tests come last, where they wait for it (hack/neighbours.sh).
neighbours-background:
	@$(NEIGHBOURS_SH) --background

neighbours-e2e: controlplane helm neighbours ## The gate next to the real cert-manager and nfd-master (skips without the archives)
	$(GO) test -count=1 -tags e2e -timeout 25m ./test/neighbours/

TEST_EXTRA += neighbours-e2e
