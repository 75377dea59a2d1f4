package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-resty/resty/v2"

	"github.com/connactor/connactor/client"
)

// Libraries like resty change TLS or proxy settings at run time by
// type-asserting *http.Transport (SetTLSClientConfig, SetProxy); with
// connactor they find none and change nothing. The pattern that works: Clone
// the client with the new settings, swap it in, Shutdown the old one (its
// requests in flight finish first).
func TestRestySwapsInAClonedClientToChangeTLSSettings(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello over TLS")
	}))
	defer srv.Close()

	c, err := client.New(client.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rc := resty.NewWithClient(&http.Client{Transport: c})
	if _, err := rc.R().Get(srv.URL); err == nil {
		t.Fatal("the test server's certificate was trusted before it was configured")
	}

	// What resty users write, and why it is not enough: the setting never
	// reaches connactor (resty logs that the transport is not *http.Transport).
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	rc.SetLogger(discardLogger{})
	rc.SetTLSClientConfig(&tls.Config{RootCAs: roots})
	if _, err := rc.R().Get(srv.URL); err == nil {
		t.Fatal("SetTLSClientConfig reached connactor: the pattern below is no longer needed")
	}

	// The pattern that works.
	c2, err := c.Clone(func(cfg *client.Config) { cfg.TLSConfig = &tls.Config{RootCAs: roots} })
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	rc.SetTransport(c2)
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := rc.R().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if resp.String() != "hello over TLS" || resp.RawResponse.TLS == nil {
		t.Fatalf("after the swap: %q, TLS %v", resp.String(), resp.RawResponse.TLS != nil)
	}
}

type discardLogger struct{}

func (discardLogger) Errorf(string, ...any) {}
func (discardLogger) Warnf(string, ...any)  {}
func (discardLogger) Debugf(string, ...any) {}
