package actors

// onLongWaitNoticed logs the long-wait warning of a route whose oldest
// caller waits for a permit (LongWaitNoticed), naming what holds it back.
func (s *Supervisor) onLongWaitNoticed(m *LongWaitNoticed) {
	e := s.byID[m.From.Id]
	if e == nil {
		return // the route has stopped
	}
	logLongWait(s.cfg.Logger, m.Route, s.permitWaitCause(e), m.Waiting, m.Oldest, m.Leased)
}

// permitWaitCause says what holds back the permits route e has queued, in
// the order grantPermits applies the limits: its fleet share (with a fleet
// budget, it holds all of its share), MaxConnsTotal, or MaxConnsPerHost.
func (s *Supervisor) permitWaitCause(e *routeEntry) waitCause {
	switch {
	case e.queued == 0:
		return waitsForPermit // granted meanwhile
	case !s.underShare(e):
		return waitsForShare
	case s.total >= s.cfg.MaxConnsTotal:
		return waitsForTotal
	case s.cfg.MaxConnsPerHost > 0 && s.hostHeld[e.host] >= s.cfg.MaxConnsPerHost:
		return waitsForHost
	}
	return waitsForPermit
}
