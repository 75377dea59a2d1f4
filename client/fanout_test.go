package client

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
)

func TestSendAllAbortsTheRestOnTheFirstError(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "slow")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes: only an abort ends this request
	})
	c := newTestClient(t, Config{MaxConnsPerRoute: 8})
	var reqs []*http.Request
	for i := 0; i < 30; i++ {
		path := "/slow"
		if i == 3 {
			path = "/fail"
		}
		reqs = append(reqs, newGet(t, srv.URL+path))
	}
	errFailed := errors.New("status 500")
	var reading atomic.Int64
	_, err := SendAll(awaitCtx(t), c, reqs, 5, func(resp *http.Response) (string, error) {
		if resp.StatusCode != 200 {
			return "", errFailed
		}
		reading.Add(1)
		b, err := io.ReadAll(resp.Body) // blocks until the fan-out aborts this request
		return string(b), err
	})
	if !errors.Is(err, errFailed) {
		t.Fatalf("SendAll: %v, want the first error", err)
	}
	if n := srv.count("/slow"); n > 4 {
		t.Fatalf("the server saw %d slow requests; at most the 4 sent beside the failing one", n)
	}
	if st := c.Stats(); st.Leased != 0 || st.Pending != 0 || st.InFlight != 0 {
		t.Fatalf("after SendAll failed: leased %d pending %d in flight %d, want 0", st.Leased, st.Pending, st.InFlight)
	}
}
