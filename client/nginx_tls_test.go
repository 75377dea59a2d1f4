package client

import (
	"strings"
	"testing"

	"github.com/connactor/connactor/internal/testkit/proxytest"
	"github.com/connactor/connactor/internal/testkit/realtest"
)

// nginxTLS is an nginx serving "ok" over TLS on 127.0.0.1 with a self-signed
// certificate, logging each request's connection serial number and the
// Proxy-Authorization header it carried.
type nginxTLS struct {
	URL  string
	Cert *proxytest.Cert
	log  string
}

func startNginxTLS(t *testing.T) *nginxTLS {
	t.Helper()
	ng := realtest.StartNginx(t, realtest.NginxConfig{
		TLS:    true,
		HTTP:   `log_format conns '$connection $connection_requests "$http_proxy_authorization" $request';`,
		Server: `access_log conns.log conns; location / { return 200 "ok"; }`,
	})
	return &nginxTLS{URL: ng.URL, Cert: ng.Cert, log: ng.Path("conns.log")}
}

// nginxRequest is one line of nginxTLS's log.
type nginxRequest struct {
	conn, proxyAuth, request string
}

// requests waits until nginx logged n requests (it logs each as it completes)
// and returns them.
func (n *nginxTLS) requests(t *testing.T, want int) []nginxRequest {
	t.Helper()
	var got []nginxRequest
	for _, line := range realtest.Lines(t, n.log, want) {
		// $connection $connection_requests "$http_proxy_authorization" $request
		conn, rest, _ := strings.Cut(line, " ")
		_, rest, _ = strings.Cut(rest, " ")
		pa, req, _ := strings.Cut(strings.TrimPrefix(rest, `"`), `" `)
		got = append(got, nginxRequest{conn: conn, proxyAuth: pa, request: req})
	}
	return got
}
