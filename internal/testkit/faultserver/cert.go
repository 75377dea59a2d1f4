package faultserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Cert is a self-signed certificate for one test server, and the pool a client
// trusts it with: so that a failing handshake fails for the reason the test
// chose (expiry, the wrong name), never for an unknown authority.
type Cert struct {
	TLS  tls.Certificate
	Pool *x509.CertPool // trusts exactly this certificate
}

// CertSpec says what a Cert is valid for.
type CertSpec struct {
	DNSNames  []string
	IPs       []net.IP
	NotBefore time.Time
	NotAfter  time.Time
}

// LoopbackCert is valid now, for 127.0.0.1 and localhost.
func LoopbackCert() (*Cert, error) {
	return NewCert(CertSpec{DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)})
}

// ExpiredCert names 127.0.0.1 and localhost, and expired a day ago.
func ExpiredCert() (*Cert, error) {
	return NewCert(CertSpec{DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
}

// WrongHostCert is valid now, for wrong-host.invalid only: a client that dials
// 127.0.0.1 or localhost must refuse it.
func WrongHostCert() (*Cert, error) {
	return NewCert(CertSpec{DNSNames: []string{"wrong-host.invalid"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)})
}

// NewCert generates a self-signed ECDSA P-256 certificate from spec.
func NewCert(spec CertSpec) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("faultserver: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, fmt.Errorf("faultserver: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "faultserver"},
		NotBefore:             spec.NotBefore,
		NotAfter:              spec.NotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              spec.DNSNames,
		IPAddresses:           spec.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("faultserver: certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("faultserver: certificate: %w", err)
	}
	c := &Cert{TLS: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		Pool: x509.NewCertPool()}
	c.Pool.AddCert(leaf)
	return c, nil
}

// ServerConfig is a TLS server configuration that presents c (HTTP/1.1 only).
func (c *Cert) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c.TLS}, NextProtos: []string{"http/1.1"}}
}
