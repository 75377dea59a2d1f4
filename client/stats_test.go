package client

import (
	"io"
	"net/http"
	"testing"
)

func TestUnclosedResponseShowsAsTheOldestLeaseInStats(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "never read") })
	c := newClient(t, Config{})
	h := c.Send(newGet(t, srv.URL), nil)
	if _, err := h.Await(awaitCtx(t)); err != nil {
		t.Fatal(err)
	}
	first := c.Stats()
	if first.Leased != 1 || first.OldestLease <= 0 || first.Routes[0].OldestLease != first.OldestLease {
		t.Fatalf("stats with an unclosed response: leased %d, oldest lease %v (route %v)",
			first.Leased, first.OldestLease, first.Routes[0].OldestLease)
	}
	if !h.Linked() {
		t.Fatal("a handle whose body is open must be linked")
	}
	if second := c.Stats(); second.OldestLease < first.OldestLease {
		t.Fatalf("the oldest lease got younger: %v then %v", first.OldestLease, second.OldestLease)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Leased != 0 || st.OldestLease != 0 || st.Idle != 1 {
		t.Fatalf("after Close: leased %d oldest %v idle %d, want 0 0 1 (a small rest is drained, the connection kept)",
			st.Leased, st.OldestLease, st.Idle)
	}
}
