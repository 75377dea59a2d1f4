package client

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// BenchmarkDispatch compares one request through RoundTrip with the same
// request through Send, its notification and Await, on a local server.
func BenchmarkDispatch(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	c := newClient(b, Config{MaxConnsPerRoute: 8})
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)

	b.Run("RoundTrip", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := c.RoundTrip(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	})
	b.Run("SendNotify", func(b *testing.B) {
		b.ReportAllocs()
		var wg sync.WaitGroup
		h := HandlerFuncs{Response: func(_ *Handle, resp *http.Response) {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			wg.Done()
		}}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				wg.Add(1)
				c.Send(req, h)
			}
		})
		wg.Wait()
	})
	b.Run("SendAwait", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				resp, err := c.Send(req, nil).Await(b.Context())
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	})
}
