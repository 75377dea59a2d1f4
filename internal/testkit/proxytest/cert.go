package proxytest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"time"

	"github.com/connactor/connactor/internal/testkit/faultserver"
)

// Cert is a self-signed certificate for tests, valid for 127.0.0.1, ::1,
// localhost and the extra names given to NewCert.
type Cert struct {
	TLS     tls.Certificate
	Pool    *x509.CertPool // trusts exactly this certificate
	CertPEM []byte
	KeyPEM  []byte
}

// NewCert generates a self-signed ECDSA P-256 certificate, valid for an hour
// (faultserver.NewCert), with its PEM encodings.
func NewCert(names ...string) *Cert {
	fc, err := faultserver.NewCert(faultserver.CertSpec{
		DNSNames:  append([]string{"localhost"}, names...),
		IPs:       []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	})
	if err != nil {
		panic("proxytest: " + err.Error())
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(fc.TLS.PrivateKey)
	if err != nil {
		panic("proxytest: key: " + err.Error())
	}
	return &Cert{TLS: fc.TLS, Pool: fc.Pool,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: fc.TLS.Certificate[0]}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}
}
