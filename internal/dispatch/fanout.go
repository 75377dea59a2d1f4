package dispatch

import (
	"context"
	"net/http"

	"github.com/sourcegraph/conc/pool"
)

// SendAll sends reqs through d with at most limit of them in flight (limit <= 0
// means all at once), hands each response to read as soon as it arrives, on
// one of SendAll's own goroutines, closes it when read returns, and returns
// read's results in the order of reqs. The first failure (a transport error,
// an error from read, or ctx ending) aborts the rest and is returned alone; a
// panic in read is re-raised on the caller's goroutine after the rest is
// aborted. See client.SendAll.
func SendAll[T any](ctx context.Context, d *Dispatcher, reqs []*http.Request, limit int, read func(*http.Response) (T, error)) ([]T, error) {
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
			h := d.Send(req, nil)
			// The fan-out's end (another request's failure, the caller's ctx)
			// aborts this request wherever it is, a body being read included.
			aborted := make(chan struct{})
			stop := context.AfterFunc(ctx, func() { defer close(aborted); h.Abort() })
			defer func() {
				if !stop() {
					<-aborted // the abort is running: its goroutine ends before this task
				}
			}()
			// Whatever ends this task but success (an error, or a panic in
			// read, which the pool re-raises) aborts its request: the response
			// is discarded with its connection. After Close it does nothing.
			defer h.Abort()
			resp, err := h.Await(ctx)
			if err != nil {
				return err
			}
			v, err := read(resp)
			if err != nil {
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
