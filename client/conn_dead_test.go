//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package client

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/connactor/connactor/internal/testkit/faultserver"
)

// A connection found dead before anything was written to it is a bad idle
// connection, not a replay: 200 GETs to a server that closes after every
// response without saying so, each sent once the server's FIN is in the
// client's socket, so that the probe before writing finds every re-used
// connection dead. Each is discarded and the GET leased again; none of them
// spends the retry budget (20% of the requests, at least 10 a second), and
// none fails, as with net/http on the same server.
func TestDeadIdleConnectionsDoNotSpendTheRetryBudget(t *testing.T) {
	const n = 200
	run := func(t *testing.T, rt http.RoundTripper, lc *faultserver.LastConn, srv *oneShotServer) (failed int) {
		url := "http://" + srv.ln.Addr().String() + "/"
		for seq := range n {
			req, err := http.NewRequest(http.MethodGet, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Seq", fmt.Sprint(seq))
			resp, err := rt.RoundTrip(req)
			if err != nil {
				failed++
				t.Logf("GET %d: %v", seq, err)
				continue
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(b) != "ok" {
				t.Fatalf("GET %d: body %q, %v", seq, b, err)
			}
			<-srv.closed
			waitFIN(t, lc)
		}
		return failed
	}

	var netLC faultserver.LastConn
	tr := &http.Transport{DialContext: netLC.Dial}
	defer tr.CloseIdleConnections()
	if failed := run(t, tr, &netLC, newOneShotServer(t, nil)); failed != 0 {
		t.Errorf("net/http: %d of %d GETs failed", failed, n)
	}

	var lc faultserver.LastConn
	c := newClient(t, Config{DialContext: lc.Dial, Logger: quietLogger()})
	if failed := run(t, c, &lc, newOneShotServer(t, nil)); failed != 0 {
		t.Errorf("connactor: %d of %d GETs failed; net/http fails none", failed, n)
	}
	st := c.Stats()
	if st.Retries != 0 || st.RetriesRefused != 0 {
		t.Errorf("the retry budget counted %d replays and refused %d; nothing was written to a dead connection, so nothing was replayed",
			st.Retries, st.RetriesRefused)
	}
	assertQuiet(t, c)
}
