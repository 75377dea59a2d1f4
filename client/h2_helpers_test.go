package client

// Load and settling helpers of the HTTP/2 tests.

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// h2Load sends n requests to base+"/r<i>" from callers goroutines (odd i are
// POSTs with a body when post is set, GETs otherwise) and checks that each
// answer is "ok /r<i>" over HTTP/2. It returns how many failed, reporting the
// first few.
func h2Load(t *testing.T, c *Client, base string, n, callers int, post bool) int64 {
	t.Helper()
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() { // owned by wg
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := h2Request(c, base, i, post && i%2 == 1); err != nil && failed.Add(1) <= 5 {
					t.Errorf("request %d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	return failed.Load()
}

func h2Request(c *Client, base string, i int64, post bool) error {
	path := fmt.Sprintf("/r%d", i)
	method, body := http.MethodGet, io.Reader(nil)
	if post {
		method, body = http.MethodPost, strings.NewReader("a body of the request "+path)
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		return err
	}
	resp, err := c.RoundTrip(req)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		return err
	case resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK || string(b) != "ok "+path:
		return fmt.Errorf("%s %s: %s %d %q", method, path, resp.Proto, resp.StatusCode, b)
	}
	return nil
}

// waitSettled waits until nothing is leased, pending or streaming, and
// returns the stats then.
func waitSettled(t *testing.T, c *Client) Stats {
	t.Helper()
	var st Stats
	waitUntil(t, "no lease, stream or caller left", func() bool {
		st = c.Stats()
		return st.Leased == 0 && st.Pending == 0 && st.Streams == 0 && st.InFlight == 0
	})
	return st
}
