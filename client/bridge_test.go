package client

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// asker is an actor that sends the Requests it is told to and reports every
// Response it receives; it reads nothing unless told to.
type asker struct {
	client *Client
	got    chan *Response
	read   bool // read and close each body
}

type ask struct {
	req *http.Request
	tag any
}

func (a *asker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *ask:
		ctx.Request(a.client.PID(), &Request{HTTP: m.req, Tag: m.tag})
	case *Response:
		if a.read && m.HTTP != nil {
			io.Copy(io.Discard, m.HTTP.Body)
			m.HTTP.Body.Close()
		}
		a.got <- m
	}
}

func newActorSystem(t *testing.T) *actor.ActorSystem {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(ProtoactorLogger(slog.New(slog.DiscardHandler))))
	t.Cleanup(sys.Shutdown)
	return sys
}

func TestAResponseCarriesItsRequestAndTagAlsoOnError(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	sys := newActorSystem(t)
	c := newClient(t, Config{System: sys})
	a := &asker{client: c, got: make(chan *Response, 2), read: true}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }))
	defer func() { sys.Root.StopFuture(pid).Wait() }()

	good := newGet(t, srv.URL)
	bad, _ := http.NewRequest(http.MethodGet, "ftp://example.invalid/", nil)
	sys.Root.Send(pid, &ask{req: good, tag: 1})
	sys.Root.Send(pid, &ask{req: bad, tag: "two"})
	for i := 0; i < 2; i++ {
		select {
		case r := <-a.got:
			switch r.Tag {
			case 1:
				if r.Err != nil || r.Req != good || r.HTTP.StatusCode != 200 {
					t.Fatalf("tag 1: %+v", r)
				}
			case "two":
				if r.Err == nil || r.Req != bad || r.HTTP != nil {
					t.Fatalf("tag two: %+v", r)
				}
			default:
				t.Fatalf("unknown tag %v", r.Tag)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no response")
		}
	}
	assertQuiet(t, c)
}

// An actor that stops before its Response arrives cannot read it: the client
// closes the body and the connection serves the next request. With
// MaxConnsPerRoute 1, a leak would leave the route dead.
func TestAStoppedActorsResponseReleasesItsConnection(t *testing.T) {
	release := make(chan struct{})
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		io.WriteString(w, "body nobody reads")
	})
	sys := newActorSystem(t)
	c := newClient(t, Config{System: sys, MaxConnsPerRoute: 1, MaxConnsTotal: 1})
	a := &asker{client: c, got: make(chan *Response, 1)}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }))
	sys.Root.Send(pid, &ask{req: newGet(t, srv.URL+"/slow")})
	waitFor(t, "the request in flight", func() bool { return c.Stats().Leased == 1 })
	sys.Root.StopFuture(pid).Wait()
	close(release)
	if got := get(t, c, srv.URL+"/next"); got != "body nobody reads" {
		t.Fatalf("next request: %q", got)
	}
	waitFor(t, "nothing leased", func() bool { st := c.Stats(); return st.Leased == 0 && st.Idle == 1 })
}

// An actor that received a Response and stopped without touching its body:
// the client closes the body and releases the connection.
func TestAnActorThatStopsWithAnUntouchedBodyReleasesItsConnection(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "unread") })
	sys := newActorSystem(t)
	c := newClient(t, Config{System: sys, MaxConnsPerRoute: 1, MaxConnsTotal: 1})
	a := &asker{client: c, got: make(chan *Response, 1)}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }))
	sys.Root.Send(pid, &ask{req: newGet(t, srv.URL)})
	select {
	case <-a.got: // delivered, body untouched
	case <-time.After(10 * time.Second):
		t.Fatal("no response")
	}
	if st := c.Stats(); st.Leased != 1 {
		t.Fatalf("the unread body should hold its connection: %+v", st)
	}
	sys.Root.StopFuture(pid).Wait()
	waitFor(t, "the connection released", func() bool { st := c.Stats(); return st.Leased == 0 })
	if got := get(t, c, srv.URL); got != "unread" {
		t.Fatalf("next request: %q", got)
	}
}

// A Request sent without a sender cannot be answered: it is dropped and its
// body closed.
func TestARequestWithoutASenderIsDroppedAndItsBodyClosed(t *testing.T) {
	sys := newActorSystem(t)
	c := newClient(t, Config{System: sys})
	body := &closeSpy{closed: make(chan struct{})}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", body)
	sys.Root.Send(c.PID(), &Request{HTTP: req})
	select {
	case <-body.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("body not closed")
	}
}

type closeSpy struct{ closed chan struct{} }

func (s *closeSpy) Read([]byte) (int, error) { return 0, io.EOF }
func (s *closeSpy) Close() error             { close(s.closed); return nil }

// caller is an actor of an embedding service: it asks the client for a request
// and must keep handling its own messages while the request is in flight.
type caller struct {
	client *Client
	url    string
	pinged chan struct{}
	got    chan string
}

func (a *caller) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		req, _ := http.NewRequest(http.MethodGet, a.url, nil)
		ctx.Request(a.client.PID(), &Request{HTTP: req})
		ctx.Send(ctx.Self(), &ping{})
	case *ping:
		close(a.pinged) // handled while the request is in flight: the mailbox is free
	case *Response:
		if m.Err != nil {
			a.got <- "error: " + m.Err.Error()
			return
		}
		b, _ := io.ReadAll(m.HTTP.Body)
		m.HTTP.Body.Close()
		a.got <- string(b)
	}
}

func TestAnActorCallerReceivesTheResponseWithoutBlockingItsMailbox(t *testing.T) {
	pinged := make(chan struct{})
	srv := newServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-pinged // answer only once the caller has handled a message of its own
		io.WriteString(w, "from the pool")
	}))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(ProtoactorLogger(slog.Default())))
	defer sys.Shutdown()
	c := newClient(t, Config{System: sys})
	a := &caller{client: c, url: srv.URL, pinged: pinged, got: make(chan string, 1)}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }))
	defer func() { sys.Root.StopFuture(pid).Wait() }()
	select {
	case got := <-a.got:
		if got != "from the pool" {
			t.Fatalf("actor got %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no response reached the actor")
	}
	assertQuiet(t, c)
}

type ping struct{}
