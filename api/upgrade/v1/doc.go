// Package v1 mirrors the Rancher System Upgrade Controller (SUC) API group
// upgrade.cattle.io/v1 (kind Plan), whose Go module is not a dependency of
// this repository.
//
// Field names, JSON tags and kubebuilder markers follow upstream
// rancher/system-upgrade-controller pkg/apis/upgrade.cattle.io/v1/types.go
// (v0.20.1); the CRD in testdata/suc/crd-plans.yaml is the authority on the
// JSON field set and types_test.go checks the mirror against it.
//
// The conventional import alias is upgradev1.
//
// +kubebuilder:object:generate=true
// +groupName=upgrade.cattle.io
package v1
