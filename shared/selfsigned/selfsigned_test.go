package selfsigned_test

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
	"time"

	"github.com/ml-platform/ml-platform/shared/selfsigned"
)

// The certificate is the leaf asked for, signed by the CA, valid for the
// lifetime from now, with a key that matches it; each CA is new.
func TestIssueSignsTheLeafWithANewCA(t *testing.T) {
	now := time.Now()
	leaf := x509.Certificate{
		Subject: pkix.Name{CommonName: "svc.ns.svc"}, DNSNames: []string{"svc.ns.svc"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	p, err := selfsigned.Issue("svc CA", leaf, now, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatalf("the key does not match the certificate: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.CA) {
		t.Fatal("no CA certificate in the CA's PEM")
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{DNSName: "svc.ns.svc", Roots: roots, CurrentTime: now.Add(time.Hour)}); err != nil {
		t.Errorf("the CA did not sign the certificate for its name: %v", err)
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{DNSName: "svc.ns.svc", Roots: roots, CurrentTime: now.Add(3 * time.Hour)}); err == nil {
		t.Error("the certificate is valid past its lifetime")
	}
	other, err := selfsigned.Issue("svc CA", leaf, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if string(other.CA) == string(p.CA) {
		t.Error("two calls issued the same CA")
	}
	if _, err := selfsigned.Issue("svc CA", leaf, now, 0); err == nil {
		t.Error("a certificate without a lifetime was issued")
	}
}
