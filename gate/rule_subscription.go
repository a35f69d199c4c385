package gate

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/qualification"
)

// ApprovalManual is the one installPlanApproval under which OLM waits for a
// person: OLM's catalog operator approves an InstallPlan at its creation
// unless a Subscription of the namespace says exactly "Manual" (absent,
// "Automatic", "manual" and anything else all mean automatic).
const ApprovalManual = "Manual"

var pathInstallPlanApproval = field.NewPath("spec", "installPlanApproval")

// SubscriptionRequest is a write of an OLM Subscription
// (operators.coreos.com/v1alpha1), reduced to what the rule reads.
type SubscriptionRequest struct {
	// Object names it, e.g. "Subscription gpu-operator/gpu-operator-certified".
	Object string
	// Package is spec.name, the OLM package it installs.
	Package string
	// Approval is spec.installPlanApproval; ApprovalSet is false when the
	// field is absent (OLM then approves automatically).
	Approval    string
	ApprovalSet bool
	// Changed: a CREATE, or an UPDATE that changes the spec. A write of the
	// metadata alone (OLM's labels, a person's annotation) is not judged: it
	// changes nothing OLM resolves.
	Changed bool
	User    UserInfo
}

// DecideSubscription (review subscription): a Subscription of the GPU
// Operator's package must leave each InstallPlan to a person's approval,
// which the operator webhook reviews; under automatic approval OLM creates
// each new version's InstallPlan already approved and moves every GPU node
// to it.
func DecideSubscription(cfg *Config, req SubscriptionRequest) Decision {
	d := Decision{Allowed: true, Object: req.Object}
	if req.Package != cfg.GPUOperatorPackage || !req.Changed {
		return d
	}
	r := &subscriptionReview{req: req}
	r.kinds, r.cfg, r.user = kindsSubscription, cfg, req.User
	var f findings
	applyTable(r, &f, &d)
	f.settle(&d)
	return d
}

// subscriptionReview is a write of the GPU Operator's Subscription.
type subscriptionReview struct {
	reviewBase
	req SubscriptionRequest
}

// subscriptionRule (Subscriptions): anything but installPlanApproval:
// Manual is refused, or admitted with a warning when the configuration
// gives the review of OLM's upgrades up (allowAutomaticOperatorApproval).
func subscriptionRule(rv review, f *findings, d *Decision) {
	r, ok := rv.(*subscriptionReview)
	if !ok || r.req.ApprovalSet && r.req.Approval == ApprovalManual {
		return
	}
	seen := strconv.Quote(qualification.Clip(r.req.Approval))
	if !r.req.ApprovalSet {
		seen = "absent (OLM's default, Automatic)"
	}
	if r.cfg.AllowAutomaticOperatorApproval {
		d.Warnings = append(d.Warnings, fmt.Sprintf("gpu-upgrade-gate: %s: %s is %s, admitted by allowAutomaticOperatorApproval: OLM approves each new GPU Operator version itself and every GPU node moves to it unreviewed (no record, proof, halt or rollout check)",
			r.req.Object, pathInstallPlanApproval, seen))
		return
	}
	f.add(operatorAutoApproval(r.cfg, r.req.Package, seen))
}

// operatorAutoApproval builds every OperatorAutoApproval blocker.
func operatorAutoApproval(cfg *Config, pkg, seen string) Blocker {
	return forbidden(CodeOperatorAutoApproval, "", pathInstallPlanApproval,
		"%s is %s for OLM package %s (the GPU Operator), expected exactly %q: under any other value OLM creates each new operator version's InstallPlan already approved, and every GPU node moves to it with no record; set spec.installPlanApproval: %s, then approve each InstallPlan with the %s annotation naming the records that qualify the new version (webhook/operator.md); to accept unreviewed operator upgrades instead, set allowAutomaticOperatorApproval: true in the gate's configuration",
		pathInstallPlanApproval, seen, qualification.Clip(pkg), ApprovalManual, ApprovalManual, AnnotationQualification)
}
