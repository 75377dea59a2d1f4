package dropin

import "strings"

// connactorFile is the connactor side's constructor, added to package pkg: a
// client as a user would make it to replace the library's own transport
// (defaults, with the proxy and dial timeout those transports set). Its dialer
// reaches loopback only: a suite's request to any other host (heimdall's
// hystrix tests ask for http://foobar.example, meaning to fail) fails at once
// as a refused dial, without a DNS query or a packet leaving the machine.
func connactorFile(pkg string) string {
	return strings.ReplaceAll(`//go:build connactor_dropin

package PKG

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	connactor "github.com/connactor/connactor/client"
)

// loopbackOnly dials loopback addresses only ("localhost" and 127.0.0.0/8,
// ::1), and refuses any other host before resolving it.
func loopbackOnly(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("the drop-in suites reach loopback only, not %s", host)}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// connactorTransport is what the patched library uses in place of its own
// transport: a new connactor client each time, as the library made a new
// transport each time, on the process's shared actor system (a client in a
// system of its own takes milliseconds to make, and some tests give their
// first request 100 ms from the server's start).
func connactorTransport() http.RoundTripper {
	c, err := connactor.New(connactor.Config{Proxy: http.ProxyFromEnvironment, DialTimeout: 30 * time.Second,
		DialContext: loopbackOnly, System: connactor.SharedSystem()})
	if err != nil {
		panic(err)
	}
	if m := os.Getenv("`+markerEnv+`"); m != "" {
		if err := os.WriteFile(m, nil, 0o644); err != nil {
			panic(err)
		}
	}
	return c
}
`, "PKG", pkg)
}

// injection returns the two implementations of the injection point fn of
// package pkg, with signature sig: net/http's side returns body, connactor's
// returns connactorBody.
func injection(pkg, sig, body, connactorBody string) map[string]string {
	return map[string]string{
		"connactor_dropin_off.go": "//go:build !" + tagConnactor + "\n\npackage " + pkg +
			"\n\nimport \"net/http\"\n\nvar _ http.RoundTripper\n\n" + sig + " {\n\t" + body + "\n}\n",
		"connactor_dropin_on.go": "//go:build " + tagConnactor + "\n\npackage " + pkg +
			"\n\nimport \"net/http\"\n\nvar _ http.RoundTripper\n\n" + sig + " {\n\t" + connactorBody + "\n}\n",
		"connactor_dropin_client.go": connactorFile(pkg),
	}
}

func with(files map[string]string, dir string) map[string]string {
	out := map[string]string{}
	for name, text := range files {
		out[dir+"/"+name] = text
	}
	return out
}

var suites = []*suite{retryablehttpSuite, restySuite, heimdallSuite}

// go-retryablehttp builds every client's *http.Client with
// cleanhttp.DefaultPooledClient() (NewClient, and a Client whose HTTPClient is
// nil): both calls go through dropinClient.
var retryablehttpSuite = &suite{
	Name:    "retryablehttp",
	Module:  "github.com/hashicorp/go-retryablehttp",
	Version: "v0.7.8",
	Pkgs:    []string{"."},
	Patches: []patch{{
		File:  "client.go",
		Old:   "cleanhttp.DefaultPooledClient()",
		New:   "dropinClient(cleanhttp.DefaultPooledClient)",
		Count: 2,
	}, {
		// TestClient_Do's server listens on a fixed port of every interface.
		File:  "client_test.go",
		Old:   `net.Listen("tcp", ":28934")`,
		New:   `net.Listen("tcp", "127.0.0.1:28934")`,
		Count: 1,
	}},
	Files: injection("retryablehttp", "func dropinClient(std func() *http.Client) *http.Client",
		"return std()", "return &http.Client{Transport: connactorTransport()}"),
	Skipped: map[string]string{
		// With connactor it fails too: it wants url.Error.Err to be net/http's
		// *net.OpError{Op: "dial", Net: "tcp", Err: *net.DNSError} itself
		// (reflect.DeepEqual); connactor's is a *conn.ExchangeError worded
		// "connactor: dial (nothing sent): http://host:port: dial tcp: ...".
		"TestRoundTripper_TransportFailureErrorHandling": "asks the system's DNS resolver for 999.999.999.999",
	},
	Excluded:      map[string]string{},
	KnownFailures: map[string]string{},
}

// resty's createClient gives an *http.Client without a Transport (New, and
// NewWithClient of such a client) the transport of createTransport(nil).
var restySuite = &suite{
	Name:    "resty",
	Module:  "github.com/go-resty/resty/v2",
	Version: "v2.17.2",
	Pkgs:    []string{"."},
	// Its tests spend about 80 s in retry backoffs and timeouts, one after
	// another; run as 4 processes they take about 25 s, with the same verdicts.
	Shards: 4,
	Patches: []patch{{
		File:  "client.go",
		Old:   "hc.Transport = createTransport(nil)",
		New:   "hc.Transport = dropinTransport(func() http.RoundTripper { return createTransport(nil) })",
		Count: 1,
	}},
	Files: injection("resty", "func dropinTransport(std func() http.RoundTripper) http.RoundTripper",
		"return std()", "return connactorTransport()"),
	Skipped: map[string]string{
		// With connactor it fails too: SetProxy type-asserts *http.Transport,
		// so the request goes straight to the server and succeeds where the
		// test expects the proxy's error.
		"TestClientProxy": "asks the system's DNS resolver for sampleproxy (SetProxy)",
	},
	Excluded: map[string]string{
		"TestClientAuthScheme":                          restyTLS,
		"TestClientAuthToken":                           restyTLS,
		"TestClientBasicAuth":                           restyTLS,
		"TestClientOnResponseError/successful_request":  restyTLS,
		"TestClientOnResponseError/http_status_error":   restyTLS,
		"TestLogCallbacks":                              restyTLS,
		"TestRequestAuthScheme":                         restyTLS,
		"TestRequestAuthToken":                          restyTLS,
		"TestRequestBasicAuth":                          restyTLS,
		"TestRequestBasicAuthFail":                      restyTLS,
		"TestRequestOverridesClientAuthorizationHeader": restyTLS,
		"TestTraceInfoOnTimeoutWithSetTimeout/HTTPS_request_with_TLS_handshake": restyTLS,
		"TestClientOptions":                            restyFields + " (TLSClientConfig.InsecureSkipVerify)",
		"TestClientSetCertificates":                    restyFields + " (TLSClientConfig.Certificates)",
		"TestClientSetRootCertificate":                 restyFields + " (TLSClientConfig.RootCAs)",
		"TestClientSetRootCertificateFromString":       restyFields + " (TLSClientConfig.RootCAs)",
		"TestClientSetRootCertificateNotExists":        restyFields + " (TLSClientConfig)",
		"TestClientSetClientRootCertificate":           restyFields + " (TLSClientConfig.ClientCAs)",
		"TestClientSetClientRootCertificateFromString": restyFields + " (TLSClientConfig.ClientCAs)",
		"TestClientSetClientRootCertificateNotExists":  restyFields + " (TLSClientConfig)",
		"TestProxySetting":                             restyFields + " (Proxy)",
	},
	KnownFailures: map[string]string{},
}

// Why resty's excluded tests need a *http.Transport: resty sets TLS, proxies
// and certificates by type-asserting its transport (Client.Transport) and only
// logs an error otherwise; connactor takes them in Config, before New.
const (
	restyTLS = "SetTLSClientConfig(InsecureSkipVerify) type-asserts *http.Transport; with connactor the " +
		"httptest TLS server's certificate stays unverifiable"
	restyFields = "reads fields of client.Transport(), which type-asserts *http.Transport"
)

// heimdall's httpclient.NewClient makes an *http.Client with a Timeout and no
// Transport (net/http's DefaultTransport); the hystrix client wraps it.
var heimdallSuite = &suite{
	Name:    "heimdall",
	Module:  "github.com/gojek/heimdall/v7",
	Version: "v7.0.3",
	Pkgs:    []string{".", "./httpclient", "./hystrix"},
	Patches: []patch{{
		File:  "httpclient/client.go",
		Old:   "\t\t\tTimeout: client.timeout,\n",
		New:   "\t\t\tTimeout:   client.timeout,\n\t\t\tTransport: dropinTransport(func() http.RoundTripper { return nil }),\n",
		Count: 1,
	}},
	Files: with(injection("httpclient", "func dropinTransport(std func() http.RoundTripper) http.RoundTripper",
		"return std()", "return connactorTransport()"), "httpclient"),
	Skipped: map[string]string{
		"httpclient:ExampleWithHTTPTimeout":  heimdallInternet,
		"httpclient:ExampleWithRetrier":      heimdallInternet,
		"hystrix:ExampleWithHTTPTimeout":     heimdallInternet,
		"hystrix:ExampleWithRetrier":         heimdallInternet,
		"hystrix:ExampleWithStatsDCollector": heimdallInternet,
	},
	Excluded: map[string]string{
		"httpclient:TestOptionsHaveDefaults": "compares NewClient's *http.Client with http.DefaultClient " +
			"(Transport nil) by value: any transport put in differs",
	},
	KnownFailures: map[string]string{},
}

const (
	heimdallInternet = "sends a request to https://www.gojek.io/"
)
