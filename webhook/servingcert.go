package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// servingCertWatcher loads and reloads the serving certificate from certDir
// (tls.crt, tls.key, as the webhook server's own watcher would) and exports
// its notAfter on every load, so an alert sees the certificate the webhook
// presents, renewals included (GPUUpgradeGateCertificateExpiry).
func servingCertWatcher(certDir string) (*certwatcher.CertWatcher, error) {
	w, err := certwatcher.New(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return nil, err
	}
	w.RegisterCallback(exportNotAfter)
	return w, nil
}

func exportNotAfter(c tls.Certificate) {
	leaf := c.Leaf
	if leaf == nil && len(c.Certificate) > 0 {
		leaf, _ = x509.ParseCertificate(c.Certificate[0])
	}
	if leaf != nil {
		servingCertExpiry.Set(float64(leaf.NotAfter.Unix()))
	}
}
