# Go tools pinned in hack/tools/<name>/go.mod, built once into the
# version-keyed cache by hack/tools/build.sh. Included by the top Makefile.
#
# staticcheck (honnef.co/go/tools): `make lint` runs it; the first build takes
# about 2 minutes on a 2-core machine. controller-gen (sigs.k8s.io/
# controller-tools): `make generate` regenerates the deepcopy code and `make
# test` verifies it is current.

TOOLS_BUILD := $(dir $(lastword $(MAKEFILE_LIST)))tools/build.sh
STATICCHECK_ARGS := staticcheck honnef.co/go/tools honnef.co/go/tools/cmd/staticcheck
STATICCHECK := $(shell $(TOOLS_BUILD) $(STATICCHECK_ARGS) --print-path)

.PHONY: staticcheck

staticcheck: ## Build staticcheck from its Go module (first time only: ~2 min)
	@$(TOOLS_BUILD) $(STATICCHECK_ARGS) >/dev/null
