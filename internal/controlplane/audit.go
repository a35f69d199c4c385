package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// auditPolicy records who wrote the objects the gate guards, and nothing else
// so the log stays small. Metadata level keeps the webhooks' audit annotations.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  resources:
  - group: upgrade.cattle.io
    resources: [plans, plans/status]
  - group: ""
    resources: [nodes, nodes/status, configmaps, pods, pods/ephemeralcontainers]
  - group: batch
    resources: [jobs, jobs/status]
  - group: apps
    resources: [daemonsets, deployments]
  - group: nvidia.com
    resources: [clusterpolicies, clusterpolicies/status, nvidiadrivers, nvidiadrivers/status]
  - group: operators.coreos.com
    resources: [subscriptions, subscriptions/status, installplans, installplans/status]
- level: None
`

// AuditEvent holds the fields of an audit.k8s.io/v1 Event that tests use
// (k8s.io/apiserver is not a dependency of this module).
type AuditEvent struct {
	AuditID          string            `json:"auditID"`
	Stage            string            `json:"stage"`
	Verb             string            `json:"verb"`
	RequestURI       string            `json:"requestURI"`
	User             AuditUser         `json:"user"`
	ImpersonatedUser *AuditUser        `json:"impersonatedUser,omitempty"`
	ObjectRef        *AuditObjectRef   `json:"objectRef,omitempty"`
	ResponseStatus   *AuditStatus      `json:"responseStatus,omitempty"`
	Annotations      map[string]string `json:"annotations,omitempty"`
	// RequestReceivedTimestamp is when the API server received the request;
	// StageTimestamp when the event's stage was reached (for
	// ResponseComplete: when it answered).
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

type AuditUser struct {
	Username string   `json:"username"`
	Groups   []string `json:"groups,omitempty"`
}

type AuditObjectRef struct {
	Resource    string `json:"resource,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	APIGroup    string `json:"apiGroup,omitempty"`
	APIVersion  string `json:"apiVersion,omitempty"`
}

type AuditStatus struct {
	Code    int32  `json:"code,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Username is the user the request acted as: the impersonated one if any.
func (e AuditEvent) Username() string {
	if e.ImpersonatedUser != nil {
		return e.ImpersonatedUser.Username
	}
	return e.User.Username
}

// AuditEvents parses the audit log written so far.
func (c *ControlPlane) AuditEvents() ([]AuditEvent, error) {
	f, err := os.Open(c.AuditLogPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var events []AuditEvent
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			// A line without its newline is still being written.
			return events, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e AuditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("controlplane: audit log line %d: %w", len(events)+1, err)
		}
		events = append(events, e)
	}
}

// WaitAuditEvent waits for an event that match accepts. The apiserver writes
// an event after it has answered, so a test that has just made a request must
// wait rather than read once.
func (c *ControlPlane) WaitAuditEvent(ctx context.Context, match func(AuditEvent) bool) (AuditEvent, error) {
	for {
		events, err := c.AuditEvents()
		if err != nil {
			return AuditEvent{}, err
		}
		for _, e := range events {
			if match(e) {
				return e, nil
			}
		}
		select {
		case <-ctx.Done():
			return AuditEvent{}, fmt.Errorf("controlplane: no matching audit event in %s: %w", c.AuditLogPath(), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
