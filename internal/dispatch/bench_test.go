package dispatch

import (
	"net/http"
	"testing"
)

// BenchmarkSend measures what Send adds to a request, on a fake request path
// that answers at once: a Handle, its goroutine and its context, then the
// notification on a worker (Notify) or the caller's Await.
func BenchmarkSend(b *testing.B) {
	d, _ := newTestDispatcher(b, newFakeTrip(0), 4, nil)
	req := newGet(b, "/")
	notified := make(chan struct{}, 1024)
	notify := HandlerFuncs{Response: func(_ *Handle, resp *http.Response) {
		resp.Body.Close()
		notified <- struct{}{}
	}}
	for _, bc := range []struct {
		name string
		send func() error
	}{
		{"Notify", func() error { d.Send(req, notify); <-notified; return nil }},
		{"Await", func() error {
			resp, err := d.Send(req, nil).Await(b.Context())
			if err == nil {
				resp.Body.Close()
			}
			return err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := bc.send(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
