// Package selfsigned issues a new private CA and one certificate it signs,
// PEM encoded: for an endpoint whose clients are handed the CA (the
// TrainingJob operator's progress endpoint) and for test servers.
package selfsigned

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"time"
)

// Pair is a CA and a certificate it signed, with the certificate's key,
// each PEM encoded.
type Pair struct {
	CA, Cert, Key []byte
}

// Issue makes a CA named caName with a new P-256 key and a certificate it
// signs from leaf, whose key, serial number and validity it fills in:
// valid from an hour before now (clocks differ) for lifetime.
func Issue(caName string, leaf x509.Certificate, now time.Time, lifetime time.Duration) (Pair, error) {
	if lifetime <= 0 {
		return Pair{}, errors.New("selfsigned: the lifetime must be positive")
	}
	notBefore, notAfter := now.Add(-time.Hour), now.Add(lifetime)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: caName},
		NotBefore: notBefore, NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Pair{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return Pair{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	leaf.SerialNumber, leaf.NotBefore, leaf.NotAfter = serial(), notBefore, notAfter
	der, err := x509.CreateCertificate(rand.Reader, &leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return Pair{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CA:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// serial is a random 128-bit serial number. crypto/rand's reader never
// fails (Go 1.24), so neither does rand.Int.
func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	return n
}
