package actors

// WaitQueue is a FIFO of waiters with O(1) push, pop and removal by key. It is
// a plain value owned by one actor (not safe for concurrent use). Removal by
// key is what lets a caller whose context ended leave the queue at once,
// wherever it is, without an O(n) scan (a route may hold 100,000 waiters).
//
// A key is anything unique among the queued waiters: a route keys its waiters
// by their ticket's pointer, which the waiter's LeaseCancelled carries too, so
// that no request writes a counter shared by every request to number itself.
type WaitQueue[K comparable, T any] struct {
	head, tail *waitNode[K, T]
	byID       map[K]*waitNode[K, T]
	free       *waitNode[K, T] // recycled nodes, to keep push/pop allocation-free
	peak       int             // most waiters since the queue was last empty
}

type waitNode[K comparable, T any] struct {
	id         K
	val        T
	prev, next *waitNode[K, T]
}

// Len returns the number of waiters.
func (q *WaitQueue[K, T]) Len() int { return len(q.byID) }

// Push appends a waiter. Keys must be unique among queued waiters.
func (q *WaitQueue[K, T]) Push(id K, v T) {
	if q.byID == nil {
		q.byID = make(map[K]*waitNode[K, T])
	}
	if _, dup := q.byID[id]; dup {
		panic("actors: internal error: waiter queued twice")
	}
	n := q.free
	if n != nil {
		q.free = n.next
		n.next = nil
	} else {
		n = &waitNode[K, T]{}
	}
	n.id, n.val, n.prev = id, v, q.tail
	if q.tail != nil {
		q.tail.next = n
	} else {
		q.head = n
	}
	q.tail = n
	q.byID[id] = n
	if len(q.byID) > q.peak {
		q.peak = len(q.byID)
	}
}

// Peek returns the oldest waiter without removing it.
func (q *WaitQueue[K, T]) Peek() (id K, v T, ok bool) {
	if q.head == nil {
		return id, v, false
	}
	return q.head.id, q.head.val, true
}

// Pop removes and returns the oldest waiter.
func (q *WaitQueue[K, T]) Pop() (id K, v T, ok bool) {
	n := q.head
	if n == nil {
		return id, v, false
	}
	id, v = n.id, n.val
	q.unlink(n)
	return id, v, true
}

// Remove takes the waiter with the given key out of the queue, wherever it is.
// It reports false when no such waiter is queued (already served or removed).
func (q *WaitQueue[K, T]) Remove(id K) (v T, ok bool) {
	n, ok := q.byID[id]
	if !ok {
		return v, false
	}
	v = n.val
	q.unlink(n)
	return v, true
}

// Find returns the oldest waiter for which match is true.
func (q *WaitQueue[K, T]) Find(match func(T) bool) (id K, v T, ok bool) {
	for n := q.head; n != nil; n = n.next {
		if match(n.val) {
			return n.id, n.val, true
		}
	}
	return id, v, false
}

// TakeFirst removes and returns the oldest waiter for which match is true.
func (q *WaitQueue[K, T]) TakeFirst(match func(T) bool) (id K, v T, ok bool) {
	for n := q.head; n != nil; n = n.next {
		if match(n.val) {
			id, v = n.id, n.val
			q.unlink(n)
			return id, v, true
		}
	}
	return id, v, false
}

// Each calls f for every waiter in arrival order.
func (q *WaitQueue[K, T]) Each(f func(id K, v T)) {
	for n := q.head; n != nil; n = n.next {
		f(n.id, n.val)
	}
}

func (q *WaitQueue[K, T]) unlink(n *waitNode[K, T]) {
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		q.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		q.tail = n.prev
	}
	delete(q.byID, n.id)
	var zeroK K // a free node keeps no waiter's ticket alive
	var zero T
	n.id, n.val, n.prev = zeroK, zero, nil
	n.next = q.free
	q.free = n
	if len(q.byID) == 0 && q.peak > 1024 {
		// Go maps never shrink: let a queue that once held 100,000 waiters give
		// its memory back when it empties.
		q.byID, q.free, q.peak = nil, nil, 0
	}
}
