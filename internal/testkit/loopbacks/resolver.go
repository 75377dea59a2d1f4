package loopbacks

import (
	"context"
	"net/netip"
	"slices"
	"sync"
)

// Resolver looks up every host as the test says: the addresses it sets, an
// error, or a lookup that hangs until its context ends. It counts its lookups
// and wakes WaitLookups at each. It is safe for concurrent use; the zero
// value answers every lookup with no address.
type Resolver struct {
	mu      sync.Mutex
	addrs   []netip.Addr
	err     error
	hang    bool
	lookups int
	changed chan struct{}
}

// Set makes every later lookup answer addrs (and neither fail nor hang).
func (r *Resolver) Set(addrs ...netip.Addr) {
	r.mu.Lock()
	r.addrs, r.err, r.hang = slices.Clone(addrs), nil, false
	r.mu.Unlock()
}

// Fail makes every later lookup fail with err.
func (r *Resolver) Fail(err error) {
	r.mu.Lock()
	r.err, r.hang = err, false
	r.mu.Unlock()
}

// Hang makes every later lookup block until its context ends.
func (r *Resolver) Hang() {
	r.mu.Lock()
	r.hang = true
	r.mu.Unlock()
}

// Lookups returns how many lookups began.
func (r *Resolver) Lookups() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups
}

// WaitLookups blocks until n lookups have begun, or ctx ends (its error is
// returned).
func (r *Resolver) WaitLookups(ctx context.Context, n int) error {
	for {
		r.mu.Lock()
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		done, ch := r.lookups >= n, r.changed
		r.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// LookupNetIP answers as the test set; network and host are ignored.
func (r *Resolver) LookupNetIP(ctx context.Context, _, _ string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.lookups++
	if r.changed != nil {
		close(r.changed)
	}
	r.changed = make(chan struct{})
	addrs, err, hang := r.addrs, r.err, r.hang
	r.mu.Unlock()
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return slices.Clone(addrs), err
}
