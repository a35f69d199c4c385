// Package webhook puts the gate's engine in front of the API server: each
// handler decodes the review, checks the kind, builds facts from the
// informer caches, calls gate, and renders the decision. Rules live in gate.
package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/gate"
)

// decideFunc turns one request into a decision. An error means the request
// itself is malformed; it is denied with 400, never allowed.
type decideFunc func(ctx context.Context, req admission.Request) (gate.Decision, error)

// handler is the shared plumbing: kind check, timing, metrics, one log line.
type handler struct {
	*Webhook
	decide decideFunc
	log    logr.Logger
	// identify classes the requester for the system-denial metric (nil:
	// nobody is a system identity).
	identify func(gate.UserInfo) string
	// mode is the enforcement mode of the webhook served here ("" enforces).
	mode gate.EnforcementMode
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
	observe(h.Metric, h.Name, identity, d, resp.Allowed, time.Since(start))
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
	var r *Resource
	for i, res := range h.Resources {
		name, sub, _ := strings.Cut(res.Resource, "/")
		if req.Resource.Group == res.Group && req.Resource.Resource == name && req.SubResource == sub {
			r = &h.Resources[i]
		}
	}
	if r == nil {
		var served []string
		for _, res := range h.Resources {
			served = append(served, res.GroupResource().String())
		}
		return fmt.Errorf("this endpoint reviews %v, got resource %q subresource %q", served, req.Resource.String(), req.SubResource)
	}
	if req.Kind.Group != r.Kind.Group || req.Kind.Kind != r.Kind.Kind {
		return fmt.Errorf("resource %s holds kind %s, got %q", r.GroupResource(), r.Kind.GroupKind(), req.Kind.String())
	}
	ops := h.OperationsOf(*r)
	if !slices.Contains(ops, req.Operation) {
		return fmt.Errorf("operation %q is not reviewed here (only %v)", req.Operation, ops)
	}
	if (req.Operation != admissionv1.Delete && carriesNone(req.Object)) || (req.Operation != admissionv1.Create && carriesNone(req.OldObject)) {
		return fmt.Errorf("%s review carries no object", req.Operation)
	}
	return nil
}

// modeFor is the enforcement mode for d: the webhook's, except that the
// writes of facts the gate trusts later are refused in every mode. A
// forged record attestation (AttestationForged) or a halt record write
// the rules refuse (a halt cleared by its requester, a halt forged) would
// outlive the mode: admitted while a team audits, it would stand as an
// approval, or as a cleared halt, once the gate enforces.
func (h *handler) modeFor(d gate.Decision) gate.EnforcementMode {
	if h.mode == "" || h.Name == WebhookHalts {
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
