package fleettest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connactor/connactor/client"
)

// Load keeps a connactor client busy: callers that each GET one URL, one
// request after another, through an http.Client over the client, reading
// every body to its end. A caller waits for a connection like any request
// does: for the route's first share, for its turn in the route's queue.
type Load struct {
	hc      *http.Client
	url     string
	ctx     context.Context // ends the callers
	cancel  context.CancelFunc
	callers sync.WaitGroup

	served, failed atomic.Int64
	started        time.Time
	// first is the earliest time, in nanoseconds from started (at least
	// 1), at which a caller read a response to its end; 0 before any. A
	// caller lowers it to its own time, if earlier, at once after the read
	// and before it counts the response in served.
	first atomic.Int64
}

// StartLoad starts n callers of url on c.
func StartLoad(c *client.Client, url string, n int) *Load { return startLoad(c, url, n) }

func startLoad(rt http.RoundTripper, url string, n int) *Load {
	l := &Load{hc: &http.Client{Transport: rt}, url: url, started: time.Now()}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	for range n {
		l.callers.Go(l.caller)
	}
	return l
}

// Served is the number of responses read to their end so far.
func (l *Load) Served() int { return int(l.served.Load()) }

// FirstServed is how long after StartLoad the earliest response was read to
// its end, whichever caller read it: for a route new to the fleet, how long
// its first connection took, the wait for its first share included. It is 0
// until Served is above 0 and set from then on. Each caller records its time
// as soon as it has read a response to its end, so a response read earlier
// than the one counted first can lower it only in that moment before it is
// counted; once the load has stopped it is final.
func (l *Load) FirstServed() time.Duration { return time.Duration(l.first.Load()) }

// Failed is the number of requests that failed (not counting those Stop
// cancelled).
func (l *Load) Failed() int { return int(l.failed.Load()) }

// Stop ends the callers (a request in flight or waiting is cancelled) and
// waits for them. Later calls do nothing.
func (l *Load) Stop() {
	l.cancel()
	l.callers.Wait()
}

func (l *Load) caller() {
	for l.ctx.Err() == nil {
		if err := l.get(); err != nil && l.ctx.Err() == nil {
			l.failed.Add(1)
			// Do not spin on a failing upstream.
			t := time.NewTimer(10 * time.Millisecond)
			select {
			case <-t.C:
			case <-l.ctx.Done():
				t.Stop()
			}
		}
	}
}

func (l *Load) get() error {
	req, err := http.NewRequestWithContext(l.ctx, http.MethodGet, l.url, nil)
	if err != nil {
		return err
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	read := max(time.Since(l.started), 1)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New("fleettest: " + resp.Status)
	}
	// Counted when read, before the body's Close (which can take its time:
	// a client's release of the connection), and first recorded, then
	// counted, so that FirstServed is set whenever Served is above 0.
	for cur := l.first.Load(); cur == 0 || int64(read) < cur; cur = l.first.Load() {
		if l.first.CompareAndSwap(cur, int64(read)) {
			break
		}
	}
	l.served.Add(1)
	return nil
}

// RouteOf returns the route named route ("http://127.0.0.1:port") of a
// Stats snapshot, or a RouteStats with only its name when the client has no
// such route (yet).
func RouteOf(st client.Stats, route string) client.RouteStats {
	for _, r := range st.Routes {
		if r.Route == route {
			return r
		}
	}
	return client.RouteStats{Route: route}
}
