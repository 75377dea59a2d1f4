package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// muteProxy forwards TCP connections from 127.0.0.1 to upstream. mute makes
// the connections open at that moment drop what the server sends (a server
// that stops answering while its socket stays open); later connections flow.
type muteProxy struct {
	ln       net.Listener
	upstream string
	wg       sync.WaitGroup // the accept loop and the copies

	mu       sync.Mutex
	accepted int
	muted    []chan struct{} // one per connection, closed when muted
	open     []net.Conn
}

func newMuteProxy(t *testing.T, upstream string) *muteProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &muteProxy{ln: ln, upstream: upstream}
	p.wg.Add(1)
	go p.accept() // owned by p.wg, ended by close
	t.Cleanup(p.close)
	return p
}

func (p *muteProxy) addr() string { return p.ln.Addr().String() }

func (p *muteProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		muted := make(chan struct{})
		p.mu.Lock()
		p.accepted++
		p.muted = append(p.muted, muted)
		p.open = append(p.open, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { // owned by p.wg: client to server, always
			defer p.wg.Done()
			io.Copy(up, c)
			up.Close()
		}()
		go func() { // owned by p.wg: server to client, until muted
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := up.Read(buf)
				select {
				case <-muted: // dropped: the client hears nothing more
				default:
					if _, werr := c.Write(buf[:n]); werr != nil {
						err = werr
					}
				}
				if err != nil {
					c.Close()
					return
				}
			}
		}()
	}
}

// mute silences every connection open now.
func (p *muteProxy) mute() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.muted {
		select {
		case <-m:
		default:
			close(m)
		}
	}
}

func (p *muteProxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *muteProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.open {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// A server that stops answering is found out by PING (HTTP2Config's
// SendPingTimeout and PingTimeout): an idle connection and one carrying a
// stream are closed for the reason ping_timeout, the stream fails instead of
// hanging, and the next request gets a new connection and succeeds.
func TestAnHTTP2ConnectionThatFailsItsPingIsClosedAndReplaced(t *testing.T) {
	held := make(chan struct{}, 1)
	srv := newH2Server(t, 0, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/held" {
			held <- struct{}{}
			<-r.Context().Done() // never answered: the client gives up on the connection
			return
		}
		io.WriteString(w, "ok")
	})
	px := newMuteProxy(t, srv.Listener.Addr().String())
	c := srv.client(t, Config{HTTP2: &http.HTTP2Config{
		SendPingTimeout: 100 * time.Millisecond, // a PING after this long without a frame
		PingTimeout:     200 * time.Millisecond, // and no answer within this: closed
	}})
	url := "https://" + px.addr()
	pingClosed := func() uint64 {
		st := c.Stats()
		if len(st.Routes) == 0 {
			return 0
		}
		return st.Routes[0].ClosedBy["ping_timeout"]
	}

	// An idle connection.
	if got := get(t, c, url+"/first"); got != "ok" {
		t.Fatalf("first request: %q", got)
	}
	px.mute()
	waitFor(t, "the idle connection closed for ping_timeout", func() bool { return pingClosed() == 1 })

	// A connection carrying a stream: the server holds the request, then
	// goes silent.
	if got := get(t, c, url+"/second"); got != "ok" || px.connections() != 2 {
		t.Fatalf("after the idle connection's ping timeout: %q on proxy connection %d, want ok on a new one", got, px.connections())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // only a guard against hanging
	defer cancel()
	errc := make(chan error, 1)
	go func() { // owned by the test, which waits for errc
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/held", nil)
		resp, err := c.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			err = errors.New("a request to a silent server succeeded: " + resp.Status)
		}
		errc <- err
	}()
	<-held
	px.mute()
	if err := <-errc; ctx.Err() != nil || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("the request on a connection failing its PING: %v (context: %v), want ErrOutcomeUnknown", err, ctx.Err())
	}
	waitFor(t, "the busy connection closed for ping_timeout", func() bool { return pingClosed() == 2 })

	if got := get(t, c, url+"/third"); got != "ok" || px.connections() != 3 {
		t.Fatalf("after the busy connection's ping timeout: %q on proxy connection %d, want ok on a new one", got, px.connections())
	}
	st := waitSettled(t, c)
	if r := st.Routes[0]; st.Open != 1 || r.Closed != 2 {
		t.Fatalf("open %d, closed by %v: want 1 open and 2 closed for ping_timeout", st.Open, r.ClosedBy)
	}
}
