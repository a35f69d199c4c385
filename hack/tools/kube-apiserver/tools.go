//go:build tools

// Package tools pins kube-apiserver for the local control plane that the e2e
// tests and `make demo` run. It lives in its own module because
// k8s.io/kubernetes needs a replace directive for every staging module.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
