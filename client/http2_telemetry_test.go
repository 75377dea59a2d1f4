package client

import (
	"crypto/tls"
	"io"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The span and the duration metric of an HTTP/2 request say
// network.protocol.version "2".
func TestHTTP2RequestsAreTracedAndMeasuredAsProtocolVersion2(t *testing.T) {
	checkLeaks(t)
	srv := newH2Server(t, 0, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	o := newObserved(t, Config{TLSConfig: &tls.Config{RootCAs: srv.roots}})
	for range 3 {
		resp, err := o.c.RoundTrip(newGet(t, srv.URL+"/traced"))
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s, want HTTP/2", resp.Proto)
		}
	}
	spans := o.spans.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans ended, want 3", len(spans))
	}
	for i, s := range spans {
		a := attrsOf(s)
		if v := a["network.protocol.version"]; v != attribute.StringValue("2") {
			t.Errorf("span %d: network.protocol.version = %q, want \"2\"", i, v.Emit())
		}
		if v := a["http.response.status_code"]; v != attribute.IntValue(200) {
			t.Errorf("span %d: http.response.status_code = %s, want 200", i, v.Emit())
		}
	}
	h, ok := o.collect(t)["http.client.request.duration"].Data.(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 || h.DataPoints[0].Count != 3 {
		t.Fatalf("http.client.request.duration: %+v", h)
	}
	if v, _ := h.DataPoints[0].Attributes.Value("network.protocol.version"); v != attribute.StringValue("2") {
		t.Errorf("http.client.request.duration: network.protocol.version = %q, want \"2\"", v.Emit())
	}
}

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
