//go:build e2e

package neighbours

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upgradev1 "github.com/gpu-upgrade-gate/gpu-upgrade-gate/api/upgrade/v1"
	"github.com/gpu-upgrade-gate/gpu-upgrade-gate/internal/testenv"
)

// bundles are the caBundles cainjector wrote, by webhook name.
func bundles(ctx context.Context) (map[string][]*x509.Certificate, error) {
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := admin.Get(ctx, types.NamespacedName{Name: release}, &v); err != nil {
		return nil, err
	}
	out := map[string][]*x509.Certificate{}
	for _, w := range v.Webhooks {
		out[w.Name] = parsePEM(w.ClientConfig.CABundle)
	}
	return out, nil
}

func parsePEM(data []byte) []*x509.Certificate {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return certs
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			certs = append(certs, c)
		}
	}
}

// caOf is the CA certificate in the chart's CA Secret.
func caOf(ctx context.Context) (*x509.Certificate, error) {
	var s corev1.Secret
	if err := admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: release + "-ca"}, &s); err != nil {
		return nil, err
	}
	certs := parsePEM(s.Data["tls.crt"])
	if len(certs) == 0 {
		return nil, fmt.Errorf("secret %s-ca holds no certificate", release)
	}
	return certs[0], nil
}

// waitInjected waits until every webhook's caBundle holds the current CA.
func waitInjected(ctx context.Context) error {
	return poll(ctx, 2*time.Minute, func() (bool, error) {
		ca, err := caOf(ctx)
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		bs, err := bundles(ctx)
		if err != nil || len(bs) == 0 {
			return false, err
		}
		for _, certs := range bs {
			if !holds(certs, ca) {
				return false, nil
			}
		}
		return true, nil
	})
}

func holds(certs []*x509.Certificate, c *x509.Certificate) bool {
	for _, x := range certs {
		if x.Equal(c) {
			return true
		}
	}
	return false
}

// served is the certificate serve presents now.
func served(t *testing.T) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(serve.Port)), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reading the presented certificate only
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// reviews is how many reviews serve has answered on path (its own metric).
func reviews(t *testing.T, path string) int {
	t.Helper()
	resp, err := http.Get("http://" + serve.Metrics + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sum := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "controller_runtime_webhook_requests_total{") && strings.Contains(line, `webhook="`+path+`"`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			require.NoError(t, err)
			sum += int(v)
		}
	}
	return sum
}

// unsafePlan is denied by the gate (no record, concurrency 5 on a GPU node).
func unsafePlan(name string) *upgradev1.Plan {
	return &upgradev1.Plan{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "system-upgrade"},
		Spec: upgradev1.PlanSpec{Concurrency: 5, Version: "v1.36.1+rke2r1", ServiceAccountName: "system-upgrade",
			Upgrade:      &upgradev1.ContainerSpec{Image: "rancher/rke2-upgrade"},
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/hostname": "cm-gpu-01"}}},
	}
}

// checkReviews: an unsafe GPU Plan is denied and a CPU-only Plan admitted,
// both answered by serve through the CA cainjector injected (a TLS failure
// would be a "failed calling webhook" error, never a denial).
func checkReviews(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	before := reviews(t, "/validate/plans")
	err := admin.Create(ctx, unsafePlan("unsafe"), client.DryRunAll)
	require.Error(t, err, what)
	assert.Contains(t, err.Error(), "denied the request", what)
	assert.NotContains(t, err.Error(), "failed calling webhook", what)
	cpu := unsafePlan("cpu")
	cpu.Spec.NodeSelector.MatchLabels["kubernetes.io/hostname"] = "cm-cpu-01"
	require.NoError(t, admin.Create(ctx, cpu, client.DryRunAll), what)
	assert.Equal(t, before+2, reviews(t, "/validate/plans"), "%s: both Plans were reviewed by serve", what)
}

var gateNodes = []testenv.NodeSpec{
	{Name: "cm-gpu-01", Fixture: "node-v100.json", Tuple: testenv.Source, Zone: "zone-a"},
	{Name: "cm-cpu-01", Tuple: testenv.Source, Zone: "zone-a"},
}

func createNodes(t *testing.T, ctx context.Context, specs []testenv.NodeSpec) {
	t.Helper()
	for _, s := range specs {
		n, err := testenv.NewNode(root, s)
		require.NoError(t, err)
		status := n.Status
		require.NoError(t, client.IgnoreAlreadyExists(admin.Create(ctx, n)))
		if n.ResourceVersion != "" {
			n.Status = status
			require.NoError(t, admin.Status().Update(ctx, n))
		}
	}
}

// renew asks cert-manager to reissue a Certificate now, as `cmctl renew`
// does: the Issuing condition set to True.
func renew(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	var c certmanagerv1.Certificate
	require.NoError(t, admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &c))
	now := metav1.Now()
	c.Status.Conditions = append(c.Status.Conditions, certmanagerv1.CertificateCondition{
		Type: certmanagerv1.CertificateConditionIssuing, Status: cmmeta.ConditionTrue, Reason: "ManuallyTriggered",
		Message: "renewal requested by the neighbours e2e test", LastTransitionTime: &now, ObservedGeneration: c.Generation})
	require.NoError(t, admin.Status().Update(ctx, &c))
}

// TestCertManager (issue 11 item 1): cert-manager issued the chart's CA chain
// and serving certificate (with the IP SAN from tls.ipAddresses), cainjector
// filled every webhook's caBundle, reviews flow through that CA, and they keep
// flowing across a renewal of the leaf and then of the CA.
func TestCertManager(t *testing.T) {
	need(t)
	ctx := context.Background()
	createNodes(t, ctx, gateNodes)

	t.Run("issuance and injection", func(t *testing.T) {
		ca, err := caOf(ctx)
		require.NoError(t, err)
		assert.True(t, ca.IsCA)
		leaf := served(t)
		require.NoError(t, leaf.CheckSignatureFrom(ca), "serve presents cert-manager's leaf, signed by the chart's CA")
		assert.True(t, slicesHasIP(leaf.IPAddresses, "127.0.0.1"), "tls.ipAddresses reached the certificate: %v", leaf.IPAddresses)
		assert.Contains(t, leaf.DNSNames, release+"."+namespace+".svc")
		bs, err := bundles(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, bs)
		for name, certs := range bs {
			assert.True(t, holds(certs, ca), "%s: cainjector injected the CA", name)
		}
		checkReviews(t, ctx, "first issuance")
	})

	t.Run("leaf renewal", func(t *testing.T) {
		old := served(t)
		var s corev1.Secret
		require.NoError(t, admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: release + "-tls"}, &s))
		renew(t, ctx, release+"-serving")
		_, err := syncServingSecret(ctx, string(s.Data["tls.crt"]))
		require.NoError(t, err)
		require.NoError(t, poll(ctx, 30*time.Second, func() (bool, error) { return !served(t).Equal(old), nil }), "serve picks the new leaf without a restart")
		checkReviews(t, ctx, "after the leaf renewal")
	})

	t.Run("CA renewal", func(t *testing.T) {
		oldCA, err := caOf(ctx)
		require.NoError(t, err)
		renew(t, ctx, release+"-ca")
		var newCA *x509.Certificate
		require.NoError(t, poll(ctx, 2*time.Minute, func() (bool, error) {
			newCA, err = caOf(ctx)
			return err == nil && !newCA.Equal(oldCA), client.IgnoreNotFound(err)
		}), "cert-manager reissues the CA")
		// The leaf is reissued by the new CA; its Secret's ca.crt is what
		// cainjector injects. The kubelet has not synced yet: serve still
		// presents the old leaf, so the bundle must keep the old CA.
		var s corev1.Secret
		require.NoError(t, admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: release + "-tls"}, &s))
		renew(t, ctx, release+"-serving")
		require.NoError(t, poll(ctx, 2*time.Minute, func() (bool, error) {
			var cur corev1.Secret
			if err := admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: release + "-tls"}, &cur); err != nil {
				return false, err
			}
			return !bytes.Equal(cur.Data["tls.crt"], s.Data["tls.crt"]), nil
		}))
		require.NoError(t, waitInjected(ctx), "cainjector injects the new CA")
		bs, err := bundles(ctx)
		require.NoError(t, err)
		for name, certs := range bs {
			assert.True(t, holds(certs, oldCA), "%s: the old CA stays in the bundle (CAInjectorMerging)", name)
		}
		checkReviews(t, ctx, "new CA injected, old leaf still served")
		_, err = syncServingSecret(ctx, string(s.Data["tls.crt"]))
		require.NoError(t, err)
		require.NoError(t, poll(ctx, 30*time.Second, func() (bool, error) { return served(t).CheckSignatureFrom(newCA) == nil, nil }))
		checkReviews(t, ctx, "new leaf of the new CA served")
	})
}

func slicesHasIP(ips []net.IP, want string) bool {
	for _, ip := range ips {
		if ip.String() == want {
			return true
		}
	}
	return false
}
