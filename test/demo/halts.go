package main

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// gpuOperator plays the GPU Operator's upgrade controller (its namespace's
// ServiceAccount, exempt from the Node webhook; RBAC through platform-admins).
var gpuOperator = person{name: "system:serviceaccount:gpu-operator:gpu-operator",
	groups: []string{"system:serviceaccounts", "system:serviceaccounts:gpu-operator", "platform-admins"}, prompt: "gpu-operator$"}

// haltSteps: the canary's node fails, the gate halts the V100 rollout, the
// next Plan is refused, the requester cannot clear the halt, bob can.
func (d *demo) haltSteps() {
	key := gate.HardwareKey([]string{"10de:1db6/10de:124a"})
	d.runStep(stepSpec{
		title:  "The canary's driver upgrade fails: the GPU Operator marks gpu-v100-01 upgrade-failed",
		why:    "a failure of a node moving to the record's target halts that hardware's rollout (docs/proof.md#halts); the gate keeps the halt in a ConfigMap, so it outlives the signal.",
		expect: allowed(),
		do: func() result {
			r := d.label(gpuOperator, "gpu-v100-01", gate.LabelDriverUpgradeState, "upgrade-failed")
			if r.err == nil {
				if h, ok := d.waitHalt(key, true); ok {
					d.out.line("    halt record: " + h.String())
				} else {
					r.problems = append(r.problems, "no halt was recorded within 15s")
				}
			}
			return r
		},
	})
	next := d.plan("gpu-v100-next", hostnames("gpu-v100-01"), nil)
	d.runStep(stepSpec{
		title:  "alice dry-runs the next V100 Plan",
		why:    "while halted, no Plan, driver change or per-node step moves V100 nodes forward; the record's rollback Plan stays allowed.",
		file:   next,
		expect: denied(webhook.WebhookPlans, gate.CodeRolloutHalted),
		do:     func() result { return d.apply(alice, next, true) },
	})
	d.runStep(stepSpec{
		title:  "alice, who requested the failed rollout, clears the halt",
		why:    "only someone other than the requester (attested by the Plan's requested-by annotation) may decide the rollout goes on.",
		expect: denied(webhook.WebhookHalts, gate.CodeRolloutHalted),
		do:     func() result { return d.clearHalt(alice, key) },
	})
	d.runStep(stepSpec{
		title:  "bob reviews the failure and clears the halt",
		why:    "an audited human act by a second person: the gate removes the halt on its next turn.",
		expect: allowed(),
		do: func() result {
			r := d.clearHalt(bob, key)
			if _, held := d.waitHalt(key, false); r.err == nil && held {
				r.problems = append(r.problems, "the gate did not remove the cleared halt within 15s")
			}
			return r
		},
	})
}

// waitHalt waits up to 15s until the hardware's halt is held (or gone).
func (d *demo) waitHalt(key string, want bool) (gate.Halt, bool) {
	cfg := d.env.Config
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var cm corev1.ConfigMap
		if err := d.env.Admin.Get(d.ctx, types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Halts.ConfigMap}, &cm); err == nil {
			h, ok := cfg.ParseHaltRecord(&cm).Halts[key]
			if ok == want || time.Now().After(deadline) {
				return h, ok
			}
		}
		if time.Now().After(deadline) || d.ctx.Err() != nil {
			return gate.Halt{}, !want
		}
	}
}

// clearHalt annotates the halt record as `kubectl annotate` does.
func (d *demo) clearHalt(who person, key string) result {
	cfg := d.env.Config
	ann := gate.ClearAnnotation(key)
	const reason = "driver fixed and node rolled back (INC-4711)"
	d.out.cmd(who.prompt, fmt.Sprintf("kubectl annotate configmap -n %s %s %s=%q", cfg.Namespace, cfg.Halts.ConfigMap, ann, reason))
	var cm corev1.ConfigMap
	err := d.env.Admin.Get(d.ctx, types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.Halts.ConfigMap}, &cm)
	if err == nil {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[ann] = reason
		d.warnings.Take()
		err = d.client(who).Update(d.ctx, &cm)
		d.printWarnings()
	}
	if err != nil {
		d.out.output(kubectlError(err, "", ""))
		return result{err: err, codes: codesOf(err)}
	}
	d.out.output("configmap/" + cfg.Halts.ConfigMap + " annotated")
	return result{}
}
