package actors

// WaitQueue is a FIFO of waiters with O(1) push, pop and removal by id. It is a
// plain value owned by one actor (not safe for concurrent use). Removal by id is
// what lets a caller whose context ended leave the queue at once, wherever it is,
// without an O(n) scan (a route may hold 100,000 waiters).
type WaitQueue[T any] struct {
	head, tail *waitNode[T]
	byID       map[uint64]*waitNode[T]
	free       *waitNode[T] // recycled nodes, to keep push/pop allocation-free
	peak       int          // most waiters since the queue was last empty
}

type waitNode[T any] struct {
	id         uint64
	val        T
	prev, next *waitNode[T]
}

// Len returns the number of waiters.
func (q *WaitQueue[T]) Len() int { return len(q.byID) }

// Push appends a waiter. Ids must be unique among queued waiters.
func (q *WaitQueue[T]) Push(id uint64, v T) {
	if q.byID == nil {
		q.byID = make(map[uint64]*waitNode[T])
	}
	if _, dup := q.byID[id]; dup {
		panic("actors: internal error: waiter queued twice")
	}
	n := q.free
	if n != nil {
		q.free = n.next
		n.next = nil
	} else {
		n = &waitNode[T]{}
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
func (q *WaitQueue[T]) Peek() (id uint64, v T, ok bool) {
	if q.head == nil {
		return 0, v, false
	}
	return q.head.id, q.head.val, true
}

// Pop removes and returns the oldest waiter.
func (q *WaitQueue[T]) Pop() (id uint64, v T, ok bool) {
	n := q.head
	if n == nil {
		return 0, v, false
	}
	id, v = n.id, n.val
	q.unlink(n)
	return id, v, true
}

// Remove takes the waiter with the given id out of the queue, wherever it is.
// It reports false when no such waiter is queued (already served or removed).
func (q *WaitQueue[T]) Remove(id uint64) (v T, ok bool) {
	n, ok := q.byID[id]
	if !ok {
		return v, false
	}
	v = n.val
	q.unlink(n)
	return v, true
}

// Find returns the oldest waiter for which match is true.
func (q *WaitQueue[T]) Find(match func(T) bool) (id uint64, v T, ok bool) {
	for n := q.head; n != nil; n = n.next {
		if match(n.val) {
			return n.id, n.val, true
		}
	}
	return 0, v, false
}

// TakeFirst removes and returns the oldest waiter for which match is true.
func (q *WaitQueue[T]) TakeFirst(match func(T) bool) (id uint64, v T, ok bool) {
	for n := q.head; n != nil; n = n.next {
		if match(n.val) {
			id, v = n.id, n.val
			q.unlink(n)
			return id, v, true
		}
	}
	return 0, v, false
}

// Each calls f for every waiter in arrival order.
func (q *WaitQueue[T]) Each(f func(id uint64, v T)) {
	for n := q.head; n != nil; n = n.next {
		f(n.id, n.val)
	}
}

func (q *WaitQueue[T]) unlink(n *waitNode[T]) {
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
	var zero T
	n.val, n.prev = zero, nil
	n.next = q.free
	q.free = n
	if len(q.byID) == 0 && q.peak > 1024 {
		// Go maps never shrink: let a queue that once held 100,000 waiters give
		// its memory back when it empties.
		q.byID, q.free, q.peak = nil, nil, 0
	}
}
