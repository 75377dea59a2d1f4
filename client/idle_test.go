package client

import (
	"io"
	"net/http"
	"testing"
)

func TestCloseIdleConnectionsThroughHTTPClient(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c := newClient(t, Config{})
	hc := &http.Client{Transport: c}
	for i := 0; i < 3; i++ {
		get(t, c, srv.URL)
	}
	if st := c.Stats(); st.Idle != 1 {
		t.Fatalf("before: %+v", st)
	}
	hc.CloseIdleConnections()
	st := c.Stats()
	if st.Idle != 0 || st.Open != 0 || st.Routes[0].ClosedBy["close_idle"] != 1 {
		t.Fatalf("after CloseIdleConnections: %+v", st)
	}
	waitFor(t, "the server sees the close", func() bool { return srv.closedConns.Load() == 1 })
	if got := get(t, c, srv.URL); got != "ok" {
		t.Fatalf("after: %q", got)
	}
}
