package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// benchCert is the HTTP/2 cells' server certificate: self-signed for
// 127.0.0.1, made for one run, in files the server processes read.
type benchCert struct {
	dir, certFile, keyFile string
	der                    []byte
}

func newBenchCert() (*benchCert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "connbench"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "connbench-tls-")
	if err != nil {
		return nil, err
	}
	c := &benchCert{dir: dir, certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem"), der: der}
	err = os.WriteFile(c.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	if err == nil {
		err = os.WriteFile(c.keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	}
	if err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

// clientConfig trusts the certificate, and nothing else.
func (c *benchCert) clientConfig() *tls.Config {
	cert, err := x509.ParseCertificate(c.der)
	if err != nil {
		panic("connbench: internal error: " + err.Error())
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{RootCAs: pool}
}

func (c *benchCert) remove() { os.RemoveAll(c.dir) }
