package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// A server that answers 413 before reading a large upload: Send's handler
// hears of it as a non-fatal problem before OnResponse, and may make it fatal.
func TestAnEarlyResponseIsANonFatalProblemBeforeTheResponse(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	})
	c := newTestClient(t, Config{})
	for _, escalate := range []bool{false, true} {
		var events []string
		done := make(chan struct{})
		h := c.Send(newUpload(t, srv.URL, 8<<20), HandlerFuncs{
			Response: func(_ *Handle, resp *http.Response) {
				events = append(events, "response "+resp.Status)
				resp.Body.Close()
				close(done)
			},
			Problem: func(_ *Handle, err error, fatal bool) bool {
				if !errors.Is(err, ErrEarlyResponse) {
					events = append(events, "other problem: "+err.Error())
				} else if fatal {
					events = append(events, "fatal early")
				} else {
					events = append(events, "early")
				}
				if fatal {
					close(done)
				}
				return escalate
			},
		})
		<-done
		want := "[early response 413 Request Entity Too Large]"
		if escalate {
			want = "[early fatal early]"
		}
		if got := fmt.Sprint(events); got != want {
			t.Fatalf("escalate=%v: %s, want %s", escalate, got, want)
		}
		if _, err := h.Await(awaitCtx(t)); escalate != (err != nil) {
			t.Fatalf("escalate=%v: Await: %v", escalate, err)
		}
	}
	assertQuiet(t, c)
}

func newUpload(t *testing.T, url string, n int) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, io.NopCloser(bytes.NewReader(make([]byte, n))))
	if err != nil {
		t.Fatal(err)
	}
	return req
}
