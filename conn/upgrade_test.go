package conn

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"testing"
)

// Upgrades: a 101 response's Body is the connection, read and written by the
// new protocol; the bytes that came with the head are read first; the request's
// context no longer bounds it; Close ends the exchange, not re-usable.
func TestSwitchingProtocolsHandsTheConnectionToTheBody(t *testing.T) {
	f := newConnFixture(t)
	go func() { // owned by the test: ends when the fixture closes the server side
		br := bufio.NewReader(f.server)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(f.server, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nhello")
		io.Copy(f.server, br) // the new protocol: echo
	}()
	ctx, cancel := context.WithCancel(context.Background())
	req := newGet(t, ctx)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	r := f.exchange(t, req, false)
	if r.Err != nil || r.Resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v, %v", r.Resp, r.Err)
	}
	cancel() // the handshake's context ends; the connection is the caller's
	rwc, ok := r.Resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("101 Body is a %T, not an io.ReadWriteCloser", r.Resp.Body)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(rwc, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("bytes sent with the 101: %q, %v", buf, err)
	}
	for _, msg := range []string{"ping!", "pong?"} {
		if _, err := rwc.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(rwc, buf); err != nil || string(buf) != msg {
			t.Fatalf("echo of %q: %q, %v", msg, buf, err)
		}
	}
	select {
	case rel := <-f.release:
		t.Fatalf("Done(%v) before the upgraded body was closed", rel.reusable)
	default:
	}
	if err := rwc.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	rwc.Close()
	if rel := <-f.release; rel.reusable {
		t.Error("an upgraded connection was offered for re-use")
	}
	select {
	case rel := <-f.release:
		t.Errorf("Done called twice (second: %+v)", rel)
	default:
	}
	if _, err := rwc.Write([]byte("late")); err == nil {
		t.Error("Write after Close succeeded")
	}
}
