package real_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/testkit/calls"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/internal/testkit/loopbacks"
)

// The status page names a route's endpoints: each address with its
// connections and failed dials, and the last lookup. (Its ejection lasts
// about a second: it may be over by the time the page renders.)
func TestStatusPageInChromiumShowsARoutesEndpoints(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	if !loopbacks.Available() {
		t.Skip("SKIPPED: this machine cannot listen on 127.0.0.2 (Linux routes all of 127.0.0.0/8 to loopback; elsewhere, add the addresses)")
	}
	release := make(chan struct{})
	srv, err := loopbacks.Start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		io.WriteString(w, "ok")
	}), loopbacks.Options{}, loopbacks.Addrs(2, 4)...)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.Down(loopbacks.Addr(4)) // in the answer, but refusing
	res := &loopbacks.Resolver{}
	res.Set(loopbacks.Addrs(2, 4)...)
	c := newClient(t, client.Config{Resolver: res})
	url := fmt.Sprintf("http://svc.test:%d/", srv.Port())

	var wg sync.WaitGroup
	for range 3 { // one dial to each address: the third fails and goes elsewhere
		wg.Go(func() { calls.Get(context.Background(), c, url) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Wait(ctx, func(cs map[netip.Addr]loopbacks.Counts) bool {
		return cs[loopbacks.Addr(2)].Requests+cs[loopbacks.Addr(3)].Requests == 3
	})
	close(release)
	wg.Wait()
	if err != nil {
		t.Fatalf("three requests did not arrive: %v", err)
	}

	page := httptest.NewServer(client.StatusHandler(c))
	defer page.Close()
	dom := runChromium(t, bin, "--dump-dom", "--virtual-time-budget=3000", page.URL+"/")
	cell := regexp.MustCompile(`data-field="endpoints">([^<]*)<`).FindSubmatch(dom)
	if cell == nil {
		t.Fatalf("no endpoints in the DOM:\n%s", dom)
	}
	for _, want := range []string{
		srv.AddrPort(loopbacks.Addr(2)).String() + " ",
		srv.AddrPort(loopbacks.Addr(3)).String() + " ",
		srv.AddrPort(loopbacks.Addr(4)).String() + " 0 open (0 leased, 0 idle), ",
		"1 of 1 dials failed",
		"resolved ",
	} {
		if !bytes.Contains(cell[1], []byte(want)) {
			t.Errorf("the endpoints shown lack %q: %s", want, cell[1])
		}
	}
}
