package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
)

// identityServer records, on the server's side, which identities each client
// connection (by remote address) carried requests for.
type identityServer struct {
	mu     sync.Mutex
	byConn map[string]map[string]int // remote addr -> identity -> requests
}

func (s *identityServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Identity")
	s.mu.Lock()
	if s.byConn[r.RemoteAddr] == nil {
		s.byConn[r.RemoteAddr] = map[string]int{}
	}
	s.byConn[r.RemoteAddr][id]++
	s.mu.Unlock()
	io.WriteString(w, "ok")
}

func (s *identityServer) connsOf() map[string]map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[string]int{}
	for addr, ids := range s.byConn {
		out[addr] = map[string]int{}
		for id, n := range ids {
			out[addr][id] = n
		}
	}
	return out
}

// getAs sends a GET on behalf of id ("" is anonymous), telling the server who
// asked in X-Identity.
func getAs(t *testing.T, c *Client, url, id string) {
	t.Helper()
	ctx := context.Background()
	if id != "" {
		ctx = WithIdentity(ctx, id)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("X-Identity", id)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Error(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

var testIdentities = []string{"alice", "bob", ""}

func TestIdentitiesNeverShareAConnection(t *testing.T) {
	is := &identityServer{byConn: map[string]map[string]int{}}
	srv := httptest.NewServer(is)
	defer srv.Close()
	c := newClient(t, Config{MaxConnsPerRoute: 2})

	var wg sync.WaitGroup
	for _, id := range testIdentities {
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 15; i++ {
					getAs(t, c, srv.URL, id)
				}
			}()
		}
	}
	wg.Wait()

	total := 0
	for addr, ids := range is.connsOf() {
		if len(ids) != 1 {
			t.Errorf("connection %s carried requests of several identities: %v", addr, ids)
		}
		for _, n := range ids {
			total += n
		}
	}
	if total != 3*4*15 {
		t.Fatalf("server saw %d requests, want %d", total, 3*4*15)
	}
	var names []string
	for _, r := range c.Stats().Routes {
		names = append(names, r.Route)
	}
	sort.Strings(names)
	host := strings.TrimPrefix(srv.URL, "http://")
	want := []string{"http://" + host, "http://" + host + " as alice", "http://" + host + " as bob"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Fatalf("routes %q, want %q", names, want)
	}
}

func TestEachIdentityReusesItsOwnConnection(t *testing.T) {
	is := &identityServer{byConn: map[string]map[string]int{}}
	srv := httptest.NewServer(is)
	defer srv.Close()
	// One connection per route: were routes shared across identities,
	// interleaving them would re-use one connection for all.
	c := newClient(t, Config{MaxConnsPerRoute: 1})
	for round := 0; round < 5; round++ {
		for _, id := range testIdentities {
			getAs(t, c, srv.URL, id)
		}
	}
	conns := is.connsOf()
	if len(conns) != 3 {
		t.Fatalf("server saw %d connections (%v), want one per identity", len(conns), conns)
	}
	for addr, ids := range conns {
		if len(ids) != 1 {
			t.Fatalf("connection %s carried %v", addr, ids)
		}
		for id, n := range ids {
			if n != 5 {
				t.Fatalf("identity %q made %d requests on %s, want all 5 on one connection", id, n, addr)
			}
		}
	}
}
