// Package calls holds the requests the tests of several packages send
// through a client: a GET that returns its status and body, and a load of
// numbered HTTP/2 requests whose every answer names its request.
package calls

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Get sends a GET for url through rt with ctx and returns the status and the
// body, which it reads to the end and closes.
func Get(ctx context.Context, rt http.RoundTripper, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// MustGet is Get that fails the test on an error or a status other than 200.
func MustGet(t testing.TB, ctx context.Context, rt http.RoundTripper, url string) string {
	t.Helper()
	code, body, err := Get(ctx, rt, url)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK {
		t.Fatalf("GET %s: status %d", url, code)
	}
	return body
}

// H2Load sends n requests to base+"/r<i>" through rt from callers goroutines
// (odd i are POSTs with a body when post is set, GETs otherwise) and checks
// that each answer is "ok /r<i>" over HTTP/2. It returns how many failed,
// reporting the first few.
func H2Load(t testing.TB, rt http.RoundTripper, base string, n, callers int, post bool) int64 {
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
				if err := H2Request(rt, base, i, post && i%2 == 1); err != nil && failed.Add(1) <= 5 {
					t.Errorf("request %d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	return failed.Load()
}

// H2Request sends request i of H2Load: a GET of base+"/r<i>", or a POST with
// a body naming it, and checks that the answer is 200 "ok /r<i>" over HTTP/2.
func H2Request(rt http.RoundTripper, base string, i int64, post bool) error {
	path := fmt.Sprintf("/r%d", i)
	method, body := http.MethodGet, io.Reader(nil)
	if post {
		method, body = http.MethodPost, strings.NewReader("a body of the request "+path)
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		return err
	}
	resp, err := rt.RoundTrip(req)
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
