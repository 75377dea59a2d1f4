package client

import (
	"crypto/tls"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// A request that fails on an HTTP/2 stream (the server resets it) is traced
// and measured as network.protocol.version "2", as one that succeeds is.
func TestAFailedHTTP2RequestIsTracedAndMeasuredAsProtocolVersion2(t *testing.T) {
	checkLeaks(t)
	srv := newH2Server(t, 0, func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	o := newObserved(t, Config{TLSConfig: &tls.Config{RootCAs: srv.roots}})
	resp, err := o.c.RoundTrip(newGet(t, srv.URL+"/reset"))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got %s, want the stream's reset", resp.Status)
	}
	spans := o.spans.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans ended, want 1", len(spans))
	}
	a := attrsOf(spans[0])
	if v := a["network.protocol.version"]; v != attribute.StringValue("2") {
		t.Errorf("span: network.protocol.version = %q, want \"2\"", v.Emit())
	}
	if _, ok := a["error.type"]; !ok {
		t.Error("span: no error.type")
	}
	h, ok := o.collect(t)["http.client.request.duration"].Data.(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 {
		t.Fatalf("http.client.request.duration: %+v", h)
	}
	if v, _ := h.DataPoints[0].Attributes.Value("network.protocol.version"); v != attribute.StringValue("2") {
		t.Errorf("http.client.request.duration: network.protocol.version = %q, want \"2\"", v.Emit())
	}
}
