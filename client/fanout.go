package client

import (
	"context"
	"net/http"

	"github.com/sourcegraph/conc/pool"
)

// SendAll sends reqs through c with at most limit of them in flight (limit <= 0
// means all at once) and waits for all of them, in the spirit of .NET's
// Task.WhenAll. Each response is handed to read as soon as it arrives, on one of
// SendAll's own goroutines, and closed when read returns; SendAll returns read's
// results in the order of reqs.
//
// The first failure (a transport error, an error from read, or ctx ending) ends
// the fan-out: requests still waiting for a connection leave their queues,
// responses being read are discarded with their connections, requests not yet
// sent are never sent (their bodies are closed), and SendAll returns that first
// error and no results. A panic in read is re-raised on the caller's goroutine,
// after the rest is aborted.
//
// Responses are read as they arrive on purpose: each unread response holds a
// connection, and holding them all until the last arrives would starve the
// requests still waiting for one. read must not keep the body after it returns.
//
// SendAll blocks until every request is over. It uses up to limit goroutines of
// its own, plus Send's per request.
func SendAll[T any](ctx context.Context, c *Client, reqs []*http.Request, limit int, read func(*http.Response) (T, error)) ([]T, error) {
	if len(reqs) == 0 {
		return []T{}, ctx.Err()
	}
	if limit <= 0 || limit > len(reqs) {
		limit = len(reqs)
	}
	results := make([]T, len(reqs))
	p := pool.New().WithContext(ctx).WithCancelOnError().WithFirstError().WithMaxGoroutines(limit)
	for i, req := range reqs {
		p.Go(func(ctx context.Context) error {
			if err := ctx.Err(); err != nil {
				closeBody(req)
				return err
			}
			h := c.Send(req, nil)
			// The fan-out's end (another request's failure, the caller's ctx)
			// aborts this request wherever it is, a body being read included.
			aborted := make(chan struct{})
			stop := context.AfterFunc(ctx, func() { defer close(aborted); h.Abort() })
			defer func() {
				if !stop() {
					<-aborted // the abort is running: its goroutine ends before this task
				}
			}()
			resp, err := h.Await(ctx)
			if err != nil {
				h.Abort()
				return err
			}
			v, err := read(resp)
			if err != nil {
				h.Abort()
				return err
			}
			h.Close()
			results[i] = v
			return nil
		})
	}
	if err := p.Wait(); err != nil {
		return nil, err
	}
	return results, nil
}
