package loader

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// TestReadsSelect: each row selects the objects the webhook's cache of it
// holds, and not their neighbours (another namespace, name or label).
func TestReadsSelect(t *testing.T) {
	cfg := gate.DefaultConfig()
	reads := ReadsOf(cfg)
	meta := func(ns, name string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
	}
	record := map[string]string{"gpu-upgrade-gate.io/qualification": "true"}
	sucJob := map[string]string{upgradev1.LabelNode: "gpu-1", upgradev1.LabelPlan: "p"}
	validator := map[string]string{"app": "nvidia-operator-validator"}
	check := map[string]string{"gpu-upgrade-gate.io/allocation-check": "true"}
	for _, tc := range []struct {
		name string
		read Read
		obj  client.Object
		want bool
	}{
		{"a Node", reads.Nodes, &corev1.Node{ObjectMeta: meta("", "gpu-1", nil)}, true},
		{"a Plan of a SUC namespace", reads.Plans, &upgradev1.Plan{ObjectMeta: meta("system-upgrade", "p", nil)}, true},
		{"a Plan elsewhere", reads.Plans, &upgradev1.Plan{ObjectMeta: meta("ml", "p", nil)}, false},
		{"a record", reads.Records, &corev1.ConfigMap{ObjectMeta: meta(cfg.Namespace, "r", record)}, true},
		{"an unlabelled ConfigMap", reads.Records, &corev1.ConfigMap{ObjectMeta: meta(cfg.Namespace, "r", nil)}, false},
		{"a record planted in another namespace", reads.Records, &corev1.ConfigMap{ObjectMeta: meta("ml", "r", record)}, false},
		{"the GPU Operator", reads.GPUOperator, &appsv1.Deployment{ObjectMeta: meta(cfg.GPUOperator.Namespace, cfg.GPUOperator.Name, nil)}, true},
		{"another Deployment", reads.GPUOperator, &appsv1.Deployment{ObjectMeta: meta(cfg.GPUOperator.Namespace, "other", nil)}, false},
		{"the DCGM exporter", reads.DCGMExporter, &appsv1.DaemonSet{ObjectMeta: meta(cfg.DCGMExporter.Namespace, cfg.DCGMExporter.Name, nil)}, true},
		{"a namesake elsewhere", reads.DCGMExporter, &appsv1.DaemonSet{ObjectMeta: meta("ml", cfg.DCGMExporter.Name, nil)}, false},
		{"a validator", reads.Validators, &corev1.Pod{ObjectMeta: meta(cfg.Proof.Validator.Namespace, "v", validator)}, true},
		{"a validator's label elsewhere", reads.Validators, &corev1.Pod{ObjectMeta: meta("ml", "v", validator)}, cfg.Proof.Validator.Namespace == ""},
		{"an allocation check", reads.AllocationChecks, &corev1.Pod{ObjectMeta: meta(cfg.Proof.AllocationCheck.Namespace, "c", check)}, true},
		{"a Pod without the label", reads.AllocationChecks, &corev1.Pod{ObjectMeta: meta(cfg.Proof.AllocationCheck.Namespace, "c", nil)}, false},
		{"SUC's Job", reads.UpgradeJobs, &batchv1.Job{ObjectMeta: meta("system-upgrade", "apply", sucJob)}, true},
		{"a Job without the node label", reads.UpgradeJobs, &batchv1.Job{ObjectMeta: meta("system-upgrade", "other", nil)}, false},
		// The Job webhook's object selector needs the plan label: a Job with
		// the node label alone would be written unreviewed.
		{"a Job with the node label but no plan label", reads.UpgradeJobs, &batchv1.Job{ObjectMeta: meta("system-upgrade", "other", map[string]string{upgradev1.LabelNode: "gpu-1"})}, false},
		{"a labelled Job elsewhere", reads.UpgradeJobs, &batchv1.Job{ObjectMeta: meta("ml", "apply", sucJob)}, false},
		{"the halt record", reads.HaltRecord, &corev1.ConfigMap{ObjectMeta: meta(cfg.Namespace, cfg.Halts.ConfigMap, nil)}, true},
		{"another ConfigMap", reads.HaltRecord, &corev1.ConfigMap{ObjectMeta: meta(cfg.Namespace, "other", nil)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := fields.Set{"metadata.name": tc.obj.GetName(), "metadata.namespace": tc.obj.GetNamespace()}
			assert.Equal(t, tc.want, tc.read.Selects(tc.obj, set))
		})
	}
	t.Run("a node's Pods", func(t *testing.T) {
		p := &corev1.Pod{ObjectMeta: meta("ml", "train", nil)}
		assert.True(t, HolderPods("gpu-1").Selects(p, fields.Set{"spec.nodeName": "gpu-1"}))
		assert.False(t, HolderPods("gpu-1").Selects(p, fields.Set{"spec.nodeName": "gpu-2"}))
	})
	assert.Len(t, reads.All(), 10, "every row is listed")
}
