//go:build tools

// Package tools keeps module requirements that packages of this repository
// are about to use pinned while they are written; go mod tidy honours it.
package tools

import (
	_ "github.com/Masterminds/semver/v3"
	_ "github.com/go-logr/logr"
	_ "github.com/go-logr/zapr"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/pflag"
	_ "github.com/stretchr/testify/assert"
	_ "github.com/stretchr/testify/require"
	_ "go.uber.org/zap"
	_ "go.yaml.in/yaml/v3"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/util/validation/field"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/yaml"
)
