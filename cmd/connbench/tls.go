package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/connactor/connactor/internal/testkit/faultserver"
)

// benchCert is the HTTP/2 cells' server certificate: self-signed for
// 127.0.0.1 (the project's one generator, faultserver.NewCert), made for one
// run, in files the server processes read.
type benchCert struct {
	dir, certFile, keyFile string
	pool                   *x509.CertPool
}

func newBenchCert() (*benchCert, error) {
	fc, err := faultserver.NewCert(faultserver.CertSpec{DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)})
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(fc.TLS.PrivateKey)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "connbench-tls-")
	if err != nil {
		return nil, err
	}
	c := &benchCert{dir: dir, certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem"), pool: fc.Pool}
	err = os.WriteFile(c.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: fc.TLS.Certificate[0]}), 0o600)
	if err == nil {
		err = os.WriteFile(c.keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	}
	if err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

// clientConfig trusts the certificate, and nothing else.
func (c *benchCert) clientConfig() *tls.Config { return &tls.Config{RootCAs: c.pool} }

func (c *benchCert) remove() { os.RemoveAll(c.dir) }
