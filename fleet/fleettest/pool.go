package fleettest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// PoolConfig configures a Pool.
type PoolConfig struct {
	System  *actor.ActorSystem // where the pool's actor lives (the cluster's)
	Route   string             // the route key: the budget grain's identity
	Addr    string             // the upstream's host:port
	Callers int                // goroutines that each send one request after another
	Counter *Counter           // counts the pool's sockets (nil: none)
	Logger  *slog.Logger       // nil: slog.Default()
	// Changed, when set, gets a value (without blocking: give it room for
	// one) whenever the pool's share or held count changes, so that tests can
	// wait for a state without polling.
	Changed chan<- struct{}
}

// Pool stands in for connactor's supervisor and one route actor: its actor
// opens connections to one upstream up to the share a fleet.Keeper gives it
// (ShareChanged), queues callers that find none, closes idle connections above
// a shrunk share at once and busy ones when their request ends, and reports
// its usage to the keeper (UsageReported) whenever it changes. Its callers
// send HTTP/1.1 requests with net/http's Request.Write and ReadResponse over
// keep-alive connections.
type Pool struct {
	cfg     PoolConfig
	pid     *actor.PID
	ctx     context.Context // ends the callers
	cancel  context.CancelFunc
	callers sync.WaitGroup // the caller goroutines
	dials   sync.WaitGroup // the dial goroutines
	drained chan struct{}  // closed by the actor once stopping and nothing is open

	// Published by the actor for Stats; read-only for everyone else.
	share, budget, held, idle, waiting atomic.Int64
	served, failed                     atomic.Int64
}

// PoolStats are a Pool's counts.
type PoolStats struct {
	Share, Budget       int // as the keeper last said
	Held, Idle, Waiting int // connections open or dialing, idle ones, callers queued
	Served, Failed      int // requests answered, and failed
}

type poolConn struct {
	net.Conn
	br *bufio.Reader
}

// Messages of the pool's actor.

// acquireRequest is sent by a caller; answered on reply (cap 1) with a
// connection, or with nil after an acquireCancelled or a failed dial.
type acquireRequest struct{ reply chan *poolConn }

// acquireCancelled is sent by a caller that gives up; if its request is still
// queued, the reply is nil; if a connection was already sent, the caller
// releases it.
type acquireCancelled struct{ reply chan *poolConn }

// connReleased is sent by a caller when its request ended. No reply.
type connReleased struct {
	c      *poolConn
	broken bool
}

// dialEnded is sent by a dial goroutine. No reply.
type dialEnded struct {
	c   *poolConn
	err error
}

// keeperSet is sent by Start. No reply.
type keeperSet struct{ pid *actor.PID }

// drainRequest is sent by Stop once the callers have ended, and by Crash at
// once. No reply; the actor closes drained when nothing is open any more.
// With crash set it closes busy connections too and reports nothing.
type drainRequest struct{ crash bool }

// NewPool spawns the pool's actor; Start starts its callers.
func NewPool(cfg PoolConfig) *Pool {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Pool{cfg: cfg, drained: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	a := &poolActor{p: p}
	p.pid = cfg.System.Root.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor { return a }), "fleettest-pool")
	return p
}

// PID is the pool's actor: give it to fleet.Config.Supervisor.
func (p *Pool) PID() *actor.PID { return p.pid }

// Start tells the pool its keeper and starts the callers.
func (p *Pool) Start(keeper *actor.PID) {
	p.cfg.System.Root.Send(p.pid, &keeperSet{pid: keeper})
	for range p.cfg.Callers {
		p.callers.Go(p.caller)
	}
}

// Stats returns the pool's counts (each read atomically, not all at one
// instant).
func (p *Pool) Stats() PoolStats {
	return PoolStats{
		Share: int(p.share.Load()), Budget: int(p.budget.Load()),
		Held: int(p.held.Load()), Idle: int(p.idle.Load()), Waiting: int(p.waiting.Load()),
		Served: int(p.served.Load()), Failed: int(p.failed.Load()),
	}
}

// Stop ends the callers (each finishes its request), closes every connection,
// reports the route idle to the keeper and stops the actor. It blocks until
// then or until ctx ends.
func (p *Pool) Stop(ctx context.Context) error {
	p.cancel()
	p.callers.Wait()
	p.cfg.System.Root.Send(p.pid, &drainRequest{})
	select {
	case <-p.drained:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.dials.Wait()
	p.cfg.System.Root.Poison(p.pid)
	return nil
}

// Crash closes every socket at once, as a process that dies does, and sends
// nothing to anyone: no usage report, no release. The pool is useless after.
func (p *Pool) Crash() {
	p.cancel()
	p.cfg.System.Root.Send(p.pid, &drainRequest{crash: true})
	p.callers.Wait()
	<-p.drained
	p.dials.Wait()
	p.cfg.System.Root.Stop(p.pid)
}

func (p *Pool) caller() {
	for p.ctx.Err() == nil {
		c := p.acquire()
		if c == nil {
			if p.ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond) // a dial failed: do not spin
			}
			continue
		}
		broken := p.exchange(c) != nil
		p.cfg.System.Root.Send(p.pid, &connReleased{c: c, broken: broken})
		if broken && p.ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond) // do not spin on a failing upstream
		}
	}
}

// acquire waits for a connection; nil when the pool stops first or the dial
// made for it failed.
func (p *Pool) acquire() *poolConn {
	reply := make(chan *poolConn, 1)
	p.cfg.System.Root.Send(p.pid, &acquireRequest{reply: reply})
	select {
	case c := <-reply:
		return c
	case <-p.ctx.Done():
		p.cfg.System.Root.Send(p.pid, &acquireCancelled{reply: reply})
		if c := <-reply; c != nil {
			p.cfg.System.Root.Send(p.pid, &connReleased{c: c})
		}
		return nil
	}
}

func (p *Pool) exchange(c *poolConn) error {
	req, err := http.NewRequest(http.MethodGet, "http://"+p.cfg.Addr+"/", nil)
	if err != nil {
		return err
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := req.Write(c); err != nil {
		p.failed.Add(1)
		return err
	}
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		p.failed.Add(1)
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		p.failed.Add(1)
		return err
	}
	p.served.Add(1)
	if resp.Close || resp.StatusCode != http.StatusOK {
		return errors.New("fleettest: connection not reusable")
	}
	return nil
}

func (p *Pool) dial() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := p.cfg.Counter.dial(ctx, p.cfg.Addr)
	end := &dialEnded{err: err}
	if err == nil {
		end.c = &poolConn{Conn: conn, br: bufio.NewReader(conn)}
	} else {
		err = fmt.Errorf("fleettest: dial %s: %w", p.cfg.Addr, err)
		end.err = err
	}
	p.cfg.System.Root.Send(p.pid, end)
}
