package protocol

// set is a set that iterates in a deterministic order (insertion order, with
// a removal moving the last item into the hole): the keeper and the host
// iterate only such sets where the order reaches their outputs, so that the
// same inputs give the same messages in the same order (the simulation is
// deterministic from its seed; Go's maps iterate at random).
type set[T comparable] struct {
	items []T
	idx   map[T]int
}

func (s *set[T]) add(v T) bool {
	if s.idx == nil {
		s.idx = map[T]int{}
	}
	if _, ok := s.idx[v]; ok {
		return false
	}
	s.idx[v] = len(s.items)
	s.items = append(s.items, v)
	return true
}

func (s *set[T]) remove(v T) bool {
	i, ok := s.idx[v]
	if !ok {
		return false
	}
	last := len(s.items) - 1
	s.items[i] = s.items[last]
	s.idx[s.items[i]] = i
	var zero T
	s.items[last] = zero
	s.items = s.items[:last]
	delete(s.idx, v)
	return true
}

func (s *set[T]) has(v T) bool {
	_, ok := s.idx[v]
	return ok
}

func (s *set[T]) len() int { return len(s.items) }

func (s *set[T]) clear() {
	clear(s.idx)
	clear(s.items)
	s.items = s.items[:0]
}
