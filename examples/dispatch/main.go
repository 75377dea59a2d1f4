// Command dispatch shows asynchronous dispatch (in the manner of HttpDispatch): it
// hands a few hundred requests to a connactor client with Send, never blocking,
// processes each response in a notification handler as it arrives, aborts some
// requests mid-flight, and prints what became of each route's requests.
//
// It runs against embedded local servers and exits by itself:
//
//	go run ./examples/dispatch
//
// Routes A, B and C answer; every tenth of their requests streams a body that
// never ends (the handler reads the first chunk and aborts it), and every tenth
// is aborted by the program right after Send (it may or may not have reached the
// server by then). Route D never answers: its requests are on the wire or queued
// until AbortAll. Route E refuses connections: its requests end in a fatal
// problem.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/connactor/connactor/client"
)

const perRoute = 60

type route struct {
	name string
	url  string
	seen atomic.Int64 // requests the server received
	srv  *httptest.Server
}

func newRoute(name string, h http.HandlerFunc) *route {
	r := &route{name: name}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.seen.Add(1)
		h(w, req)
	}))
	r.url = r.srv.URL
	return r
}

func answer(w http.ResponseWriter, req *http.Request) {
	switch req.URL.Path {
	case "/slow":
		io.WriteString(w, "first chunk;")
		w.(http.Flusher).Flush()
		<-req.Context().Done() // the rest never comes
	default:
		time.Sleep(2 * time.Millisecond) // a little work
		fmt.Fprintf(w, "item %s", req.URL.Query().Get("i"))
	}
}

// outcome is what the program learned about one request.
type outcome struct {
	route    string
	what     string // "response", "problem", "aborted"
	expected bool   // a final notification is awaited (the program does not abort it)
}

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run does the whole demonstration, printing to out.
func run(out io.Writer) error {
	routes := []*route{
		newRoute("A", answer),
		newRoute("B", answer),
		newRoute("C", answer),
		newRoute("D", func(w http.ResponseWriter, req *http.Request) { <-req.Context().Done() }),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	refused := &route{name: "E", url: "http://" + ln.Addr().String()}
	ln.Close() // nothing listens there any more: dials are refused
	routes = append(routes, refused)
	defer func() {
		for _, r := range routes {
			if r.srv != nil {
				r.srv.Close()
			}
		}
	}()

	c, err := client.New(client.Config{
		MaxConnsPerRoute: 4,
		HandlerWorkers:   4,
		Logger:           slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	defer c.Close()

	var mu sync.Mutex
	outcomes := map[*client.Handle]*outcome{}
	var notified sync.WaitGroup // final notifications still expected
	// record notes what a handler saw; a Handle the program aborted stays
	// "aborted" (a notification that started before Abort may end after it).
	record := func(h *client.Handle, what string) {
		mu.Lock()
		defer mu.Unlock()
		o := outcomes[h]
		if o.expected {
			defer notified.Done()
		}
		if o.what != "aborted" {
			o.what = what
		}
	}
	aborted := func(h *client.Handle) {
		mu.Lock()
		outcomes[h].what = "aborted"
		mu.Unlock()
	}
	handler := client.HandlerFuncs{
		Response: func(h *client.Handle, resp *http.Response) {
			if h.Request().URL.Path == "/slow" {
				buf := make([]byte, len("first chunk;"))
				io.ReadFull(resp.Body, buf)
				h.Abort() // mid-body: the connection is closed, never re-used
				record(h, "aborted")
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close() // releases the connection at once
			record(h, "response")
		},
		Problem: func(h *client.Handle, err error, fatal bool) bool {
			if fatal {
				record(h, "problem")
			}
			return false
		},
	}

	start := time.Now()
	var handles, abortNow, stuck []*client.Handle
	for i := 0; i < perRoute*len(routes); i++ {
		r := routes[i%len(routes)]
		n := i / len(routes)
		path := "/item"
		if n%10 == 3 {
			path = "/slow"
		}
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s%s?i=%d", r.url, path, i), nil)
		if err != nil {
			return err
		}
		o := &outcome{route: r.name}
		switch {
		case r.name == "D":
		case n%10 == 6 && r != refused:
		default:
			o.expected = true
			notified.Add(1)
		}
		mu.Lock() // the handler may run before Send returns
		h := c.Send(req, handler)
		outcomes[h] = o
		mu.Unlock()
		handles = append(handles, h)
		switch {
		case r.name == "D":
			stuck = append(stuck, h)
		case !o.expected:
			abortNow = append(abortNow, h)
		}
	}
	fmt.Fprintf(out, "sent %d requests in %v without blocking\n", len(handles), time.Since(start).Round(time.Microsecond))

	for _, h := range abortNow {
		h.Abort() // unsent: leaves its queue; sent: its connection is closed
		aborted(h)
	}
	notified.Wait() // every request that can end has ended and been handled
	st := c.Stats()
	fmt.Fprintf(out, "before AbortAll: %d leased, %d pending (route D's requests, which never get an answer)\n", st.Leased, st.Pending)
	c.AbortAll()
	for _, h := range stuck {
		aborted(h)
	}
	st = c.Stats()
	fmt.Fprintf(out, "after AbortAll:  %d leased, %d pending, %d idle connections kept\n\n", st.Leased, st.Pending, st.Idle)

	// Await agrees with the handlers: an aborted Handle reports ErrAborted.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, h := range handles {
		_, err := h.Await(ctx)
		if o := outcomes[h]; (o.what == "aborted") != errors.Is(err, client.ErrAborted) {
			return fmt.Errorf("%s: Await says %v, the handler saw %q", h.Request().URL, err, o.what)
		}
	}

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "route\tsent\tresponse\tproblem\taborted\tserver saw\t")
	for _, r := range routes {
		var sent, resp, prob, abrt int
		for _, o := range outcomes {
			if o.route != r.name {
				continue
			}
			sent++
			switch o.what {
			case "response":
				resp++
			case "problem":
				prob++
			case "aborted":
				abrt++
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", r.name, sent, resp, prob, abrt, r.seen.Load())
	}
	return tw.Flush()
}
