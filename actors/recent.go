package actors

// recentMax is how many recent closes and waits a route remembers for Stats
// and the status page.
const recentMax = 16

// ring keeps the last recentMax values; a plain value owned by one actor.
// Its places are allocated with its first value: most routes never wait,
// and a route that never closed a connection has nothing to remember.
type ring[T any] struct {
	buf  *[recentMax]T
	next int
	n    int
}

func (r *ring[T]) add(v T) {
	if r.buf == nil {
		r.buf = new([recentMax]T)
	}
	r.buf[r.next] = v
	r.next = (r.next + 1) % recentMax
	if r.n < recentMax {
		r.n++
	}
}

// list returns the values, newest first, in a new slice.
func (r *ring[T]) list() []T {
	out := make([]T, 0, r.n)
	for i := 1; i <= r.n; i++ {
		out = append(out, r.buf[(r.next-i+recentMax)%recentMax])
	}
	return out
}
