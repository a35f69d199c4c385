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

CONTROLLER_GEN_ARGS := controller-gen sigs.k8s.io/controller-tools sigs.k8s.io/controller-tools/cmd/controller-gen
CONTROLLER_GEN := $(shell $(TOOLS_BUILD) $(CONTROLLER_GEN_ARGS) --print-path)
DEEPCOPY := api/upgrade/v1/zz_generated.deepcopy.go

.PHONY: controller-gen generate verify-generate

controller-gen: ## Build controller-gen from its Go module (first time only: ~1-2 min)
	@$(TOOLS_BUILD) $(CONTROLLER_GEN_ARGS) >/dev/null

generate: controller-gen ## Regenerate the deepcopy code of api/ (controller-gen object)
	$(CONTROLLER_GEN) object paths=./api/...

# Regenerates in place and fails when that changed the file: commit it then.
verify-generate: controller-gen ## Fail when api/'s deepcopy code is not what make generate writes
	@tmp=$$(mktemp); cp $(DEEPCOPY) $$tmp; \
	$(CONTROLLER_GEN) object paths=./api/...; \
	if ! diff -u $$tmp $(DEEPCOPY); then rm -f $$tmp; \
	  echo "$(DEEPCOPY) was stale: make generate rewrote it; commit it" >&2; exit 1; fi; rm -f $$tmp

TEST_EXTRA += verify-generate
