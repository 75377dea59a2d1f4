package real_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/internal/testkit/realtest"
)

// Real nginx closes each connection after 3 requests ("Connection: close" on
// the third answer) and idle ones after 1s: 500 sequential and 500 concurrent
// requests all succeed, none needing a retry, each reaching nginx once.
func TestRealNginxWithKeepAliveLimitsServesEveryRequest(t *testing.T) {
	t.Parallel()
	ng := realtest.StartNginx(t, realtest.NginxConfig{
		HTTP:   "keepalive_requests 3; keepalive_timeout 1s;",
		Server: `access_log access.log; location / { return 200 "ok $request_uri\n"; }`,
	})
	url := ng.URL
	c := newClient(t, client.Config{MaxConnsPerRoute: 8, MaxConnsTotal: 8})
	var gotConns atomic.Int64
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { gotConns.Add(1) }}
	get := func(path string) error {
		req, err := http.NewRequest("GET", url+path, nil)
		if err != nil {
			return err
		}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := c.RoundTrip(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 || string(b) != "ok "+path+"\n" {
			return fmt.Errorf("%s: %d %q", path, resp.StatusCode, b)
		}
		return nil
	}

	for i := 0; i < 500; i++ {
		if i == 250 {
			// Past keepalive_timeout: nginx closes the idle connection, the idle
			// watch removes it, and the next request dials.
			time.Sleep(1300 * time.Millisecond)
		}
		if err := get(fmt.Sprintf("/seq/%d", i)); err != nil {
			t.Fatalf("sequential request %d: %v", i, err)
		}
	}
	if n := gotConns.Load(); n != 500 {
		t.Errorf("500 sequential requests took %d connections; a retry happened", n)
	}

	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := 0; i < 500; i++ {
		wg.Add(1)
		go func() { // owned by wg
			defer wg.Done()
			if err := get(fmt.Sprintf("/par/%d", i)); err != nil {
				if failed.Add(1) <= 5 {
					t.Errorf("concurrent request %d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of 500 concurrent requests failed", n)
	}

	st := c.Stats()
	if st.Leased != 0 || st.InFlight != 0 || st.Pending != 0 {
		t.Errorf("after the runs: leased %d, in flight %d, pending %d", st.Leased, st.InFlight, st.Pending)
	}
	if len(st.Routes) != 1 {
		t.Fatalf("routes: %+v", st.Routes)
	}
	r := st.Routes[0]
	if r.Open > r.Max || r.Reuses > 2*r.Opened || r.Leases != uint64(gotConns.Load()) {
		t.Errorf("route %s: open %d (max %d), %d leases, %d re-uses on %d connections; at most 2 re-uses each",
			r.Route, r.Open, r.Max, r.Leases, r.Reuses, r.Opened)
	}
	t.Logf("nginx: %d leases on %d connections (%d re-used), %d GotConn for 1000 requests, closed by %v",
		r.Leases, r.Opened, r.Reuses, gotConns.Load(), r.ClosedBy)

	c.Close()
	// Every request reached nginx exactly once: count its access log, which
	// nginx writes after each response (so a client may read the last
	// response before its line is there).
	if n := len(realtest.Lines(t, ng.Path("access.log"), 1000)); n != 1000 {
		t.Errorf("nginx logged %d requests, want 1000", n)
	}
}
