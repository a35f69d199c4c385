package precondition

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Alert is one alert as the source reports it.
type Alert struct {
	Name   string
	Labels map[string]string
	// State is the source's word: Alertmanager's active, suppressed or
	// unprocessed; Prometheus's firing.
	State string
	Since time.Time
}

// String names the alert for a message: name{matching labels} state.
func (a Alert) String() string {
	return fmt.Sprintf("%s (%s since %s)", a.Name, a.State, a.Since.UTC().Format(time.RFC3339))
}

// IsAlertmanager says whether the URL is Alertmanager's /api/v2/alerts
// (else Prometheus's /api/v1/alerts).
func IsAlertmanager(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && strings.HasSuffix(u.Path, "/api/v2/alerts")
}

// ParseAlerts reads a source's answer: Alertmanager's /api/v2/alerts (a
// JSON list of alerts, each with labels and status.state) or Prometheus's
// /api/v1/alerts ({"status":"success","data":{"alerts":[...]}}). Every
// alert Alertmanager lists fires, silenced or inhibited ones too: a
// silence mutes a notification, it does not make the cluster healthy.
// Prometheus's pending alerts do not fire yet.
func ParseAlerts(body []byte, alertmanager bool) ([]Alert, error) {
	if alertmanager {
		var list []struct {
			Labels   map[string]string `json:"labels"`
			StartsAt time.Time         `json:"startsAt"`
			Status   struct {
				State string `json:"state"`
			} `json:"status"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, fmt.Errorf("not an Alertmanager /api/v2/alerts answer (a JSON list of alerts): %w", err)
		}
		if list == nil {
			// null is no list: Alertmanager answers [] when nothing fires.
			return nil, errors.New("not an Alertmanager /api/v2/alerts answer: null, expected a JSON list of alerts")
		}
		out := make([]Alert, 0, len(list))
		for _, a := range list {
			out = append(out, Alert{Name: a.Labels["alertname"], Labels: a.Labels, State: a.Status.State, Since: a.StartsAt})
		}
		return out, nil
	}
	var resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   *struct {
			Alerts []struct {
				Labels   map[string]string `json:"labels"`
				State    string            `json:"state"`
				ActiveAt time.Time         `json:"activeAt"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("not a Prometheus /api/v1/alerts answer: %w", err)
	}
	if resp.Status != "success" || resp.Data == nil || resp.Data.Alerts == nil {
		return nil, fmt.Errorf("the Prometheus answer says status %q (%s), expected success with a data.alerts list", resp.Status, resp.Error)
	}
	var out []Alert
	for _, a := range resp.Data.Alerts {
		if a.State == "firing" {
			out = append(out, Alert{Name: a.Labels["alertname"], Labels: a.Labels, State: a.State, Since: a.ActiveAt})
		}
	}
	return out, nil
}

// Match lists the firing alerts the matcher selects, in the source's order.
func (a *Alerts) Match(alerts []Alert) []Alert {
	var out []Alert
	for _, al := range alerts {
		if len(a.AlertNames) > 0 && !slices.Contains(a.AlertNames, al.Name) {
			continue
		}
		ok := true
		for k, v := range a.Labels {
			if got, has := al.Labels[k]; !has || got != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, al)
		}
	}
	return out
}

// Matcher says in words which alerts count, for messages.
func (a *Alerts) Matcher() string {
	var parts []string
	if len(a.AlertNames) > 0 {
		parts = append(parts, "alertname in ["+strings.Join(a.AlertNames, ", ")+"]")
	}
	for _, k := range slices.Sorted(maps.Keys(a.Labels)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, a.Labels[k]))
	}
	if len(parts) == 0 {
		return "any alert"
	}
	return strings.Join(parts, ", ")
}
