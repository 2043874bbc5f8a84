package testenv

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"time"

	"github.com/ml-platform/ml-platform/shared/selfsigned"
)

// frontProxyArgs makes, in dir, a front-proxy CA and the client
// certificate it signs, and returns the kube-apiserver flags that make its
// aggregator present that certificate to aggregated API servers (Kueue's
// visibility server) and publish the CA for them to trust the user it
// forwards in X-Remote-* headers.
func frontProxyArgs(dir string) (map[string][]string, error) {
	leaf := x509.Certificate{
		Subject:  pkix.Name{CommonName: "front-proxy-client"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	p, err := selfsigned.Issue("front-proxy-ca", leaf, time.Now(), 24*time.Hour)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"front-proxy-ca.crt": p.CA, "front-proxy-client.crt": p.Cert, "front-proxy-client.key": p.Key}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	return map[string][]string{
		"requestheader-client-ca-file":       {filepath.Join(dir, "front-proxy-ca.crt")},
		"requestheader-allowed-names":        {"front-proxy-client"},
		"requestheader-username-headers":     {"X-Remote-User"},
		"requestheader-group-headers":        {"X-Remote-Group"},
		"requestheader-extra-headers-prefix": {"X-Remote-Extra-"},
		"proxy-client-cert-file":             {filepath.Join(dir, "front-proxy-client.crt")},
		"proxy-client-key-file":              {filepath.Join(dir, "front-proxy-client.key")},
	}, nil
}
