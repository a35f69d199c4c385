# Local control plane (real etcd + kube-apiserver) for the e2e tests, the load
# tests and the demo. Included by the top Makefile.
#
# CONTROLPLANE_DIR is where the binaries live: GUG_CONTROLPLANE_DIR if set,
# else a version-keyed cache directory outside the clone. It is exported as
# GUG_CONTROLPLANE_DIR, which is where internal/controlplane looks for them.

CONTROLPLANE_SH := $(dir $(lastword $(MAKEFILE_LIST)))controlplane.sh

# := with ifndef so the script runs once per make, not at every expansion;
# --print-dir only reads go.mod files, it never builds.
ifndef CONTROLPLANE_DIR
CONTROLPLANE_DIR := $(shell $(CONTROLPLANE_SH) --print-dir)
endif
export GUG_CONTROLPLANE_DIR := $(CONTROLPLANE_DIR)

.PHONY: controlplane
controlplane: ## Build etcd and kube-apiserver from their Go modules (first time only: ~15 min)
	@$(CONTROLPLANE_SH) >/dev/null
