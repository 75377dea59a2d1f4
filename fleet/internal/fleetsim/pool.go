package fleetsim

import "time"

// pool is one member's connections to one route, as its supervisor keeps
// them: it opens connections while it holds less than both its share and its
// demand (callers), closes idle ones above its share at once, and busy ones
// above it when their request ends (a request in flight is never cut). It
// tells the keeper its usage at every change.
type pool struct {
	m       *member
	route   int
	demand  int
	share   int
	held    int // connections open (the budget counts these)
	closing int // busy connections above the share, closing when their request ends
	// waitFrom: since when it has callers and no connection (zero: it has
	// one, or no callers).
	waitFrom time.Time
}

// maxRequest is how long a request in flight may still take: a busy
// connection above the share closes within it.
const maxRequest = 200 * time.Millisecond

func (p *pool) setShare(share int) {
	p.share = share
	p.adjust()
}

func (p *pool) setDemand(d int) {
	changed := d != p.demand
	p.demand = d
	p.adjustReport(changed)
}

func (p *pool) adjust() { p.adjustReport(false) }

func (p *pool) adjustReport(changed bool) {
	s := p.m.s
	for p.held < min(p.share, p.demand) {
		p.held++
		s.opened(p.route)
		changed = true
	}
	if over := p.held - p.closing - p.share; over > 0 {
		idle := min(over, max(0, p.held-p.closing-p.demand))
		for range idle {
			p.held--
			s.closed(p.route)
			changed = true
		}
		gen := p.m.gen
		for range over - idle {
			p.closing++
			s.c.after(time.Duration(s.c.rng.Int64N(int64(maxRequest))), func() {
				if !p.m.live(gen) || p.closing == 0 {
					return // the process ended: dropAll closed it
				}
				p.closing--
				p.held--
				s.closed(p.route)
				p.report()
				p.track()
			})
		}
	}
	if changed {
		p.report()
	}
	p.track()
}

// track notes when the pool starts waiting for its first connection, and how
// long it waited once it has one.
func (p *pool) track() {
	now := p.m.s.c.now
	switch {
	case p.demand > 0 && p.held == 0 && p.waitFrom.IsZero():
		p.waitFrom = now
	case p.held > 0 && !p.waitFrom.IsZero():
		p.m.s.m.waited(p.waitFrom, now)
		p.waitFrom = time.Time{}
	case p.demand == 0:
		p.waitFrom = time.Time{}
	}
}

func (p *pool) report() {
	if !p.m.alive || p.m.leaving {
		return
	}
	idle := max(0, p.held-p.demand)
	now := p.m.s.c.now
	p.m.keeper.Usage(p.m.s.routes[p.route], p.held, idle, max(0, p.demand-p.held), now)
	p.m.tickSoon()
}

// dropAll closes every connection at once: the process stopped (or shuts
// down, its requests ended first).
func (p *pool) dropAll() {
	for range p.held {
		p.m.s.closed(p.route)
	}
	p.held, p.closing, p.share = 0, 0, 0
	p.waitFrom = time.Time{}
}
