package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// WebSocket over the pool: a real WebSocket client (github.com/coder/websocket) dials through
// an http.Client whose Transport is connactor, against the same library's
// server: the 101 response's Body is the connection, messages flow both ways,
// the pool counts the connection as leased while it is open and forgets it
// once it is closed.
func TestWebSocketThroughTheClient(t *testing.T) {
	var served sync.WaitGroup
	srv := newServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/chat" {
			w.Write([]byte("plain"))
			return
		}
		served.Add(1)
		defer served.Done()
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		defer ws.CloseNow()
		ctx := r.Context()
		if err := ws.Write(ctx, websocket.MessageText, []byte("welcome")); err != nil {
			return
		}
		for { // echo until the client closes
			typ, msg, err := ws.Read(ctx)
			if err != nil {
				return
			}
			if err := ws.Write(ctx, typ, append([]byte("echo "), msg...)); err != nil {
				return
			}
		}
	}))
	c := newClient(t, Config{MaxConnsPerRoute: 2, Logger: testLogger()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/chat"
	ws, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: &http.Client{Transport: c}})
	if err != nil {
		t.Fatalf("WebSocket dial through connactor: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if _, msg, err := ws.Read(ctx); err != nil || string(msg) != "welcome" {
		t.Fatalf("server's first message: %q, %v", msg, err)
	}
	for i := range 5 {
		out := fmt.Sprintf("message %d", i)
		if err := ws.Write(ctx, websocket.MessageText, []byte(out)); err != nil {
			t.Fatal(err)
		}
		typ, msg, err := ws.Read(ctx)
		if err != nil || typ != websocket.MessageText || string(msg) != "echo "+out {
			t.Fatalf("echo of %q: %v %q, %v", out, typ, msg, err)
		}
	}
	if st := c.Stats(); st.Open != 1 || st.Leased != 1 {
		t.Errorf("while the WebSocket is open: open %d, leased %d; want 1 and 1", st.Open, st.Leased)
	}
	if err := ws.Close(websocket.StatusNormalClosure, "bye"); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("close: %v", err)
	}
	waitFor(t, "the upgraded connection to leave the pool", func() bool {
		st := c.Stats()
		return st.Open == 0 && st.Leased == 0
	})
	served.Wait()
	// The route still serves plain requests.
	if got := get(t, c, srv.URL+"/plain"); got != "plain" {
		t.Errorf("plain GET after the WebSocket: %q", got)
	}
	assertQuiet(t, c)
}
