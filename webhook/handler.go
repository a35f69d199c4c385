// Package webhook puts the gate's engine in front of the API server: each
// handler decodes the review, checks the kind, builds facts from the
// informer caches, calls gate, and renders the decision. Rules live in gate.
package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// Paths the handlers are served on; the chart's webhook configuration uses
// the same.
const (
	PathPlans   = "/validate/plans"
	PathNodes   = "/validate/nodes"
	PathRecords = "/validate/records"
	PathDriver  = "/validate/driver"
	PathJobs    = "/validate/jobs"
	// PathDriverStep is the GPU Operator's per-node driver step.
	PathDriverStep = "/validate/driver-step"
	// PathOperator is an upgrade of the GPU Operator itself.
	PathOperator = "/validate/operator"
	// PathPlanStatus guards status.applying of Plans.
	PathPlanStatus = "/validate/plan-status"
	// PathCompletions reviews SUC's completion write of a node.
	PathCompletions = "/validate/completions"
	// PathHalts reviews writes of the halt record ConfigMap.
	PathHalts = "/validate/halts"
)

// decideFunc turns one request into a decision. An error means the request
// itself is malformed; it is denied with 400, never allowed.
type decideFunc func(ctx context.Context, req admission.Request) (gate.Decision, error)

// handler is the shared plumbing: kind check, timing, metrics, one log line.
type handler struct {
	resource string
	// contract is the webhook's contract file (webhook/*.md); reviews are
	// the engine reviews it runs, whose codes the contract lists.
	contract string
	reviews  []gate.Review
	// gvrs[i] is reviewed only with kind kinds[i].
	gvrs  []schema.GroupVersionResource
	kinds []schema.GroupVersionKind
	ops   []admissionv1.Operation
	// subresources served besides the resource itself (e.g. "status").
	subresources []string
	decide       decideFunc
	log          logr.Logger
	// identify classes the requester for the system-denial metric (nil:
	// nobody is a system identity).
	identify func(gate.UserInfo) string
	// webhook is the name the chart gives the webhook served here, mode its
	// enforcement mode ("" enforces).
	webhook string
	mode    gate.EnforcementMode
}

func (h *handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	tr := traceOf(ctx)
	tr.mark("read") // the body read and the review decoded
	var (
		d    gate.Decision
		resp admission.Response
		mode = gate.EnforcementEnforce
		err  = h.check(req)
	)
	if err == nil {
		d, err = h.decide(ctx, req)
	}
	if err != nil {
		d = gate.InvalidReview(req.Kind.Kind+" "+objectName(req), err)
		resp = admission.Errored(http.StatusBadRequest, err)
		resp.AuditAnnotations = d.AuditAnnotations()
	} else {
		mode = h.modeFor(d)
		resp = respond(d, mode)
	}
	identity := ""
	if h.identify != nil {
		identity = h.identify(userOf(req))
	}
	observe(h.resource, h.webhook, identity, d, resp.Allowed, time.Since(start))
	tr.mark("respond")
	kv := []any{"uid", req.UID, "user", req.UserInfo.Username, "operation", req.Operation,
		"object", d.Object, "dryRun", req.DryRun != nil && *req.DryRun, "decision", resp.AuditAnnotations[gate.AuditDecision],
		"codes", d.Codes(), "record", resp.AuditAnnotations[gate.AuditRecord], "nodes", d.Nodes,
		"durationMs", float64(time.Since(start).Microseconds()) / 1000, "phasesMs", tr.String()}
	if mode != gate.EnforcementEnforce {
		kv = append(kv, "enforcement", mode, "wouldDeny", !d.Allowed && resp.Allowed)
	}
	h.log.Info("decision", kv...)
	return resp
}

// check refuses a review whose resource, kind or operation is not what this
// handler serves: a crafted mismatch must be denied, never decoded into the
// wrong type.
func (h *handler) check(req admission.Request) error {
	i := -1
	for j, gvr := range h.gvrs {
		if req.Resource.Group == gvr.Group && req.Resource.Resource == gvr.Resource {
			i = j
		}
	}
	if i < 0 || (req.SubResource != "" && !slices.Contains(h.subresources, req.SubResource)) {
		return fmt.Errorf("this endpoint reviews %v, got resource %q subresource %q", h.gvrs, req.Resource.String(), req.SubResource)
	}
	if want := h.kinds[i]; req.Kind.Group != want.Group || req.Kind.Kind != want.Kind {
		return fmt.Errorf("resource %s holds kind %s, got %q", h.gvrs[i].GroupResource(), want.GroupKind(), req.Kind.String())
	}
	for _, op := range h.ops {
		if req.Operation == op {
			if (op != admissionv1.Delete && carriesNone(req.Object)) || (op != admissionv1.Create && carriesNone(req.OldObject)) {
				return fmt.Errorf("%s review carries no object", req.Operation)
			}
			return nil
		}
	}
	return fmt.Errorf("operation %q is not reviewed here (only %v)", req.Operation, h.ops)
}

// modeFor is the enforcement mode for d: the webhook's, except that the
// writes of facts the gate trusts later are refused in every mode. A
// forged record attestation (AttestationForged) or a halt record write
// the rules refuse (a halt cleared by its requester, a halt forged) would
// outlive the mode: admitted while a team audits, it would stand as an
// approval, or as a cleared halt, once the gate enforces.
func (h *handler) modeFor(d gate.Decision) gate.EnforcementMode {
	if h.mode == "" || h.webhook == WebhookHalts {
		return gate.EnforcementEnforce
	}
	for _, b := range d.Blockers {
		if b.Code == gate.CodeAttestationForged {
			return gate.EnforcementEnforce
		}
	}
	return h.mode
}

// respond renders a decision: allowed or denied, always with the audit
// annotations and warnings. This is the one place the enforcement mode
// acts: in warn and audit mode a denial is answered as an allow that names
// its blockers (audit annotations would-deny and enforcement; in warn mode
// also a warning per blocker, as ValidatingAdmissionPolicy's Warn action
// does; audit, like its Audit action, tells the client nothing). Only the
// engine's decisions follow the mode: a review that could not be read at
// all (Handle's 400) and the reviews refused unread (limits.go) are denied
// in every mode, since no rule judged them.
func respond(d gate.Decision, mode gate.EnforcementMode) admission.Response {
	resp := admission.Allowed("")
	if !d.Allowed && (mode == gate.EnforcementWarn || mode == gate.EnforcementAudit) {
		resp.Warnings = d.Warnings
		if mode == gate.EnforcementWarn {
			for _, b := range d.Blockers {
				resp.Warnings = append(resp.Warnings, "gpu-upgrade-gate would deny this write (enforcement: warn): "+b.Message())
			}
		}
		resp.AuditAnnotations = d.AuditAnnotations()
		resp.AuditAnnotations[gate.AuditDecision] = "allow"
		resp.AuditAnnotations[gate.AuditWouldDeny] = resp.AuditAnnotations[gate.AuditReasons]
		resp.AuditAnnotations[gate.AuditEnforcement] = string(mode)
		return resp
	}
	if !d.Allowed {
		var causes []metav1.StatusCause
		for _, e := range d.ErrorList() {
			causes = append(causes, metav1.StatusCause{Type: metav1.CauseType(e.Type), Message: e.Detail, Field: e.Field})
		}
		resp = admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
			Allowed: false,
			Result: &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
				Message: d.Message(), Details: &metav1.StatusDetails{Causes: causes}},
		}}
	}
	resp.Warnings = d.Warnings
	resp.AuditAnnotations = d.AuditAnnotations()
	return resp
}

// carriesNone: neither the raw object nor one the one-pass path decoded.
func carriesNone(o runtime.RawExtension) bool { return len(o.Raw) == 0 && o.Object == nil }

func objectName(req admission.Request) string {
	if req.Namespace != "" {
		return req.Namespace + "/" + req.Name
	}
	return req.Name
}

// userOf is the requester as the engine sees it.
func userOf(req admission.Request) gate.UserInfo {
	return gate.UserInfo{Name: req.UserInfo.Username, Groups: req.UserInfo.Groups}
}
