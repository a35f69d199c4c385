# The real system-upgrade-controller (SUC) for the e2e tests and the demo, built from the
# workplace's shared/thirdparty source archive (hack/suc.sh). Included by the
# top Makefile. Where the archive is absent the build is skipped with a
# message and the tests that run SUC skip, naming the archive.
#
# SUC is the binary: GUG_SUC if set, else the version-keyed cache path. It is
# exported as GUG_SUC, which is where internal/testenv looks for it (the e2e
# tests and the demo's rollout section).

SUC_SH := $(dir $(lastword $(MAKEFILE_LIST)))suc.sh

# := with ifndef so the script runs once per make; --print-path never builds.
ifndef SUC
SUC := $(if $(GUG_SUC),$(GUG_SUC),$(shell $(SUC_SH) --print-path))
endif
export GUG_SUC := $(SUC)

.PHONY: suc

e2e demo: suc

suc: ## Build SUC v0.20.1 from ../shared/thirdparty (first time only: ~6-11 min; skipped without the archive)
	@$(SUC_SH) >/dev/null
