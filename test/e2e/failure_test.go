//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/webhook"
)

// review posts a raw body to a webhook path the way the API server does.
func review(t *testing.T, path string, body []byte) (int, string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(env.CA.PEM)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Post(fmt.Sprintf("https://127.0.0.1:%d%s", env.Port, path), "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func reviewJSON(kind, resource, group string, object string) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",
		"kind":{"group":%q,"version":"v1","kind":%q},"resource":{"group":%q,"version":"v1","resource":%q},
		"operation":"CREATE","userInfo":{"username":"mallory"},"namespace":"system-upgrade","name":"x","object":%s}}`, group, kind, group, resource, object))
}

func TestCraftedReviews(t *testing.T) {
	plan := `{"apiVersion":"upgrade.cattle.io/v1","kind":"Plan","metadata":{"name":"x","namespace":"system-upgrade"},"spec":{"concurrency":1}}`
	cases := []struct {
		name, path string
		body       []byte
	}{
		{"not JSON", webhook.PathPlans, []byte("{{{{")},
		{"empty", webhook.PathPlans, nil},
		{"no request", webhook.PathPlans, []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`)},
		{"kind mismatch: a Node posted as a Plan", webhook.PathPlans, reviewJSON("Plan", "plans", "upgrade.cattle.io", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"x"}}`)},
		{"resource mismatch: a Plan on the nodes path", webhook.PathNodes, reviewJSON("Plan", "plans", "upgrade.cattle.io", plan)},
		{"Node kind for plans resource", webhook.PathPlans, reviewJSON("Node", "plans", "upgrade.cattle.io", plan)},
		{"malformed field", webhook.PathPlans, reviewJSON("Plan", "plans", "upgrade.cattle.io", `{"apiVersion":"upgrade.cattle.io/v1","kind":"Plan","metadata":{"name":"x"},"spec":{"concurrency":"one"}}`)},
		{"no object", webhook.PathPlans, reviewJSON("Plan", "plans", "upgrade.cattle.io", `null`)},
		{"oversized", webhook.PathPlans, reviewJSON("Plan", "plans", "upgrade.cattle.io", `{"apiVersion":"upgrade.cattle.io/v1","kind":"Plan","metadata":{"name":"x","annotations":{"a":"`+strings.Repeat("x", 8<<20)+`"}}}`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := review(t, tc.path, tc.body)
			assert.Less(t, code, 500, body)
			if code == http.StatusOK {
				var ar struct {
					Response struct {
						Allowed bool `json:"allowed"`
					} `json:"response"`
				}
				require.NoError(t, json.Unmarshal([]byte(body), &ar), body)
				assert.False(t, ar.Response.Allowed, "a malformed review is never allowed: %s", body)
			}
		})
	}
}

func TestCertificateRotation(t *testing.T) {
	before, err := env.ServingCert()
	require.NoError(t, err)
	_, err = env.CA.WriteServing(env.CertDir)
	require.NoError(t, err)
	deadline := time.Now().Add(30 * time.Second)
	var after []byte
	for time.Now().Before(deadline) {
		after, err = env.ServingCert()
		require.NoError(t, err)
		if !bytes.Equal(before, after) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.NotEqual(t, before, after, "the webhook must serve the rotated certificate without a restart")
	// And the API server, trusting the same CA, still gets answers.
	c, _ := as(t, "alice")
	p := planFor("after-rotation")
	require.NoError(t, c.Create(context.Background(), p))
	require.NoError(t, env.Admin.Delete(context.Background(), p))
}

func planFor(name string) *upgradev1.Plan { return plan(name, "v100-r580", "gpu-v100-01") }

// TestWebhookDown runs last in its file: with the webhook stopped, the
// API server refuses Plan writes (failurePolicy Fail) and stores nothing.
func TestWebhookDown(t *testing.T) {
	ctx := context.Background()
	require.NoError(t, env.StopWebhook())
	defer func() { require.NoError(t, env.StartWebhook(ctx)) }()
	c, _ := as(t, "alice")
	p := planFor("while-down")
	err := c.Create(ctx, p)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `failed calling webhook "plans.gpu-upgrade-gate.io"`)
	assert.True(t, apierrors.IsNotFound(env.Admin.Get(ctx, client.ObjectKeyFromObject(p), &upgradev1.Plan{})))
}
