package main

import (
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/net/html"

	"github.com/connactor/connactor/client"
)

// The link checker's actors. A coordinator fans the URLs out to its workers,
// round robin; a worker asks the connactor client for each URL it gets
// (ctx.Request to the client's PID) and receives the answer as a
// *client.Response message, so that its mailbox is never blocked while a
// request is in flight: one worker has many requests in flight at once. The
// client's limits (connections per route, and the fleet budget when the
// service is part of a cluster) decide how many run at a time.

// check is sent by the coordinator to a worker: check one URL. No reply; the
// worker answers with checked. The worker sends it to the client as the
// Request's Tag, and gets it back in the Response.
type check struct {
	url   string
	from  string // the page that links to it ("" for a start URL)
	depth int    // links of pages at depth < maxDepth are followed
}

// checked is sent by a worker to the coordinator when a URL has been checked.
// No reply.
type checked struct {
	check
	status int           // the response's status, 0 when err is set
	err    error         // the transport failure
	took   time.Duration // from the request to the response head
	links  []string      // absolute http(s) links of an HTML page that is followed
}

// Result is one checked link of the report.
type Result struct {
	URL, From string
	Status    int
	Err       error
	Took      time.Duration
}

// Broken says whether the link is broken: a transport failure, or a status of
// 400 or more.
func (r Result) Broken() bool { return r.Err != nil || r.Status >= 400 }

// coordinator checks every link reachable from its start URLs within
// maxDepth, each once, and delivers the results on done when nothing is left
// in flight. Its workers are its children: stopping it stops them.
type coordinator struct {
	start    []string
	maxDepth int
	workers  int
	client   *actor.PID // the connactor client's actor (client.Client.PID)
	done     chan<- []Result

	pids    []*actor.PID
	next    int
	seen    map[string]bool
	pending int
	results []Result
}

func (c *coordinator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.seen = map[string]bool{}
		for range c.workers {
			w := &worker{client: c.client, coordinator: ctx.Self(), maxDepth: c.maxDepth, started: map[*check]time.Time{}}
			c.pids = append(c.pids, ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return w })))
		}
		for _, u := range c.start {
			c.fanOut(ctx, check{url: u})
		}
	case *checked:
		c.pending--
		c.results = append(c.results, Result{URL: m.url, From: m.from, Status: m.status, Err: m.err, Took: m.took})
		for _, l := range m.links {
			c.fanOut(ctx, check{url: l, from: m.url, depth: m.depth + 1})
		}
		if c.pending == 0 {
			c.done <- c.results
		}
	}
}

// fanOut sends a URL not seen yet to the next worker.
func (c *coordinator) fanOut(ctx actor.Context, ch check) {
	if c.seen[ch.url] {
		return
	}
	c.seen[ch.url] = true
	c.pending++
	ctx.Send(c.pids[c.next%len(c.pids)], &ch)
	c.next++
}

// worker checks URLs with the connactor client.
type worker struct {
	client      *actor.PID
	coordinator *actor.PID
	maxDepth    int
	started     map[*check]time.Time // requests in flight, by their Tag
}

func (w *worker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *check:
		req, err := http.NewRequest(http.MethodGet, m.url, nil)
		if err != nil {
			ctx.Send(w.coordinator, &checked{check: *m, err: err})
			return
		}
		req.Header.Set("User-Agent", "connactor-linkchecker/1")
		w.started[m] = time.Now()
		// ctx.Request, not ctx.Send: the client answers the sender. The Tag
		// comes back in the Response.
		ctx.Request(w.client, &client.Request{HTTP: req, Tag: m})
	case *client.Response:
		ch := m.Tag.(*check)
		res := &checked{check: *ch, took: time.Since(w.started[ch])}
		delete(w.started, ch)
		if m.Err != nil {
			res.err = m.Err
		} else {
			res.status = m.HTTP.StatusCode
			res.links = w.links(ch, m)
			// Closing the body releases the connection (a small rest is
			// drained, so that it can be re-used). Read or close every body:
			// an unread one holds its connection (the client closes it if
			// this actor stops first).
			m.HTTP.Body.Close()
		}
		ctx.Send(w.coordinator, res)
	case *actor.Started, *actor.Stopping, *actor.Stopped:
	default:
		slog.Warn("linkchecker: worker got an unknown message", "type", m)
	}
}

// maxPage is the most of a page the checker reads to find its links.
const maxPage = 1 << 20

// links returns the links of a page the checker follows: an HTML page found
// above maxDepth. Reading the body happens in
// Receive: the pages are small and local here. A service that reads large or
// slow bodies hands them to a goroutine that reports back with a message,
// and keeps its mailbox free.
func (w *worker) links(ch *check, m *client.Response) []string {
	ct, _, _ := mime.ParseMediaType(m.HTTP.Header.Get("Content-Type"))
	if ch.depth >= w.maxDepth || m.HTTP.StatusCode != http.StatusOK || ct != "text/html" {
		return nil
	}
	base := m.Req.URL // the request this Response answers
	var out []string
	z := html.NewTokenizer(io.LimitReader(m.HTTP.Body, maxPage))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return out
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			if string(name) != "a" || !hasAttr {
				continue
			}
			for {
				k, v, more := z.TagAttr()
				if string(k) == "href" {
					if u, err := base.Parse(strings.TrimSpace(string(v))); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
						u.Fragment = ""
						out = append(out, u.String())
					}
				}
				if !more {
					break
				}
			}
		}
	}
}
