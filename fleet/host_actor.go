package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/connactor/connactor/fleet/internal/protocol"
	"github.com/connactor/connactor/fleet/internal/protocol/fleetpb"
)

// hostActor is a member's budget host: protocol.Host in an actor. Nodes
// reach it at actor.NewPID(member address, hostName) with Renew requests
// (answered with RenewReply), hosts with Handoff and HandoffAck; the member
// tells it the registry and its session; its coordinator calls run on
// goroutines of the member and report back as messages. All its state is
// touched only inside Receive.
type hostActor struct {
	m    *member
	h    *protocol.Host
	self *actor.PID
	stop chan struct{} // ends the ticker
	// leaving: a graceful stop hands the shards over; the member hears
	// when none is left (handOver).
	leaving bool
	// retries are transfers whose outcome was unknown (etcd did not
	// answer, or failed), to be asked again from their time on, on a tick
	// (retryPause): a host whose etcd keeps failing does not ask it in a
	// loop.
	retries []transferRetry
	// corrupt are the shards whose acquisition found an unreadable key in
	// etcd, warned about once until an acquisition reads it again.
	corrupt map[int]bool
}

// transferRetry is a transfer to ask again from at; failed is how many
// tries have failed so far.
type transferRetry struct {
	shards []int
	epochs []uint64
	to     protocol.HostInfo
	failed int
	at     time.Time
}

// Messages to the host actor. No reply: hostLeaveRequest, from the member's
// leave, is answered by closing the member's handedOver.
type (
	hostTick          struct{}
	hostLeaveRequest  struct{}
	hostAcquireResult struct {
		shard int
		res   acquired
		err   error
	}
	hostTransferResult struct {
		shards []int
		epochs []uint64
		to     protocol.HostInfo
		failed int // tries that failed before this one
		res    transferred
		err    error
	}
)

var theHostTick = &hostTick{}

func (a *hostActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.onStarted(ctx)
	case *fleetpb.Renew, *fleetpb.Handoff, *fleetpb.HandoffAck:
		a.onProtocol(ctx, m.(proto.Message))
	case *hostTick:
		now := time.Now()
		a.retryTransfers(now)
		a.h.Tick(now)
		a.checkLeft()
	case *registryChanged:
		a.h.SetRegistry(m.reg, time.Now())
	case *sessionConfirmed:
		a.h.Confirmed(m.session, m.until)
	case *sessionLost:
		// The shards went with the session: a transfer asked again would
		// only find them lost (and its answer, about an epoch that ended,
		// would be ignored).
		a.retries = nil
		a.h.SessionLost()
	case *hostAcquireResult:
		a.onAcquired(m)
	case *hostTransferResult:
		a.onTransferred(m)
	case *hostLeaveRequest:
		a.leave()
	case *actor.Stopping, *actor.Restarting:
		// A restart sends no Stopping, and the new instance starts a ticker
		// of its own: this one's ends here either way (else it would keep
		// the member's leave waiting for its calls).
		if a.stop != nil {
			close(a.stop)
			a.stop = nil
		}
	case *actor.Stopped:
		if a.m != nil {
			close(a.m.hostDone)
			a.m.hostStopped()
		}
	default:
		if a.m != nil {
			a.m.logger.Warn("fleet: budget host got an unknown message", slog.String("type", fmt.Sprintf("%T", m)))
		}
	}
}

func (a *hostActor) onStarted(ctx actor.Context) {
	a.self = ctx.Self()
	a.m = lookupMember(ctx.ActorSystem())
	if a.m == nil || a.self.Id != hostName {
		// Activated through the cluster's identity lookup, which the budget
		// does not use: nothing to host.
		ctx.Logger().Warn("fleet: a budget host was activated by identity; it stops (budget hosts are started by fleet.New)")
		a.m = nil
		ctx.Stop(a.self)
		return
	}
	cfg := protocol.HostConfig{ID: a.m.id, Lease: a.m.kind.Lease}
	a.h = protocol.NewHost(cfg, hostSink{a})
	if reg := a.m.registry(); reg != nil {
		// A restart: the registry came before, and comes again only when it
		// changes (at a first start the coordinator has not opened yet).
		a.h.SetRegistry(reg, time.Now())
	}
	a.corrupt = map[int]bool{}
	a.stop = make(chan struct{})
	a.m.ticker(a.self, theHostTick, a.stop)
	if a.m.leaving.Load() {
		// A restart while the member leaves: the request came to the
		// instance before. This one owns nothing it knows of (the shards
		// the other was moving stay bound to the session, and go with its
		// end), and acquires nothing.
		a.leave()
	}
}

// leave starts a graceful stop: the shards are handed over.
func (a *hostActor) leave() {
	a.leaving = true
	a.h.Leave(time.Now())
	a.checkLeft()
}

// onProtocol handles a message from a node or a host, as it crossed the
// cluster.
func (a *hostActor) onProtocol(ctx actor.Context, pm proto.Message) {
	msg, err := protocol.Decode(pm)
	if err != nil {
		a.m.logger.Warn("fleet: budget host got a malformed message", slog.Any("error", fmt.Errorf("%w: %w", ErrBadMessage, err)))
		return
	}
	now := time.Now()
	switch m := msg.(type) {
	case protocol.Renew:
		ctx.Respond(protocol.Encode(a.h.HandleRenew(m, now)))
	case protocol.Handoff:
		a.h.ReceiveHandoff(m, now)
	case protocol.HandoffAck:
		a.h.ReceiveHandoffAck(m)
		a.checkLeft()
	}
}

func (a *hostActor) onAcquired(m *hostAcquireResult) {
	now := time.Now()
	if m.err == nil {
		delete(a.corrupt, m.shard)
	}
	switch {
	case errors.Is(m.err, ErrCorruptKey):
		if !a.corrupt[m.shard] {
			a.m.logger.Warn("fleet: a shard cannot be taken while its key in etcd is unreadable; delete the key to free it",
				slog.Int("shard", m.shard), slog.Any("error", m.err))
			a.corrupt[m.shard] = true
		}
		a.h.AcquireFailed(m.shard, "", now)
	case m.err != nil:
		a.m.logger.Debug("fleet: a shard could not be acquired", slog.Int("shard", m.shard), slog.Any("error", m.err))
		a.h.AcquireFailed(m.shard, "", now)
	case m.res.ok && m.res.session != a.h.Session():
		// Bound to a session that has ended since: the shard went with it.
		a.h.AcquireFailed(m.shard, "", now)
	case m.res.ok && m.res.from != "":
		a.h.OwnedAlready(m.shard, m.res.epoch, m.res.from, now)
		a.owned(m.shard, m.res.epoch)
	case m.res.ok:
		a.h.Acquired(m.shard, m.res.epoch, m.res.prev, now)
		a.owned(m.shard, m.res.epoch)
	default:
		a.h.AcquireFailed(m.shard, m.res.owner, now)
	}
}

func (a *hostActor) onTransferred(m *hostTransferResult) {
	now := time.Now()
	switch {
	case m.err != nil:
		// The outcome is unknown (etcd did not answer in time, or failed):
		// the shards stay moving, granting nothing, until a new try knows.
		failed := m.failed + 1
		pause := retryPause(failed, rand.Float64())
		a.m.logger.Debug("fleet: a transfer's outcome is unknown; asking again", slog.Any("error", m.err),
			slog.Int("failed", failed), slog.Duration("after", pause))
		a.retries = append(a.retries, transferRetry{shards: m.shards, epochs: m.epochs, to: m.to, failed: failed,
			at: now.Add(pause)})
	case m.res.ok:
		a.staleTransfer(a.h.Transferred(m.shards, m.epochs, m.res.epochs, m.to, now))
	default:
		a.staleTransfer(a.h.TransferFailed(m.shards, m.epochs, m.res.lost, now))
	}
	a.checkLeft()
}

// staleTransfer notes the shards a transfer's answer left alone: it was about
// an ownership that ended with a lost session, and the host took them again
// since.
func (a *hostActor) staleTransfer(n int) {
	if n > 0 {
		a.m.logger.Debug("fleet: a transfer's answer came for shards taken again since; it is ignored", slog.Int("shards", n))
	}
}

func (a *hostActor) owned(shard int, epoch uint64) {
	if a.m.kind.OnOwned != nil {
		a.m.kind.OnOwned(shard, epoch)
	}
}

// checkLeft ends a graceful stop once no shard is left to hand over.
func (a *hostActor) checkLeft() {
	if a.leaving && a.h.Owned() == 0 && a.h.Pending() == 0 {
		a.m.handOver()
	}
}

func (a *hostActor) transfer(shards []int, epochs []uint64, to protocol.HostInfo, failed int) {
	a.call(func(ctx context.Context, c coordinator) any {
		res, err := c.Transfer(ctx, shards, epochs, to)
		return &hostTransferResult{shards: shards, epochs: epochs, to: to, failed: failed, res: res, err: err}
	})
}

// retryTransfers asks again about the transfers whose time has come.
func (a *hostActor) retryTransfers(now time.Time) {
	keep := a.retries[:0]
	for _, r := range a.retries {
		if now.Before(r.at) {
			keep = append(keep, r)
			continue
		}
		a.transfer(r.shards, r.epochs, r.to, r.failed)
	}
	clear(a.retries[len(keep):])
	a.retries = keep
}

// The pause before a transfer is asked again: retryPauseMin after the first
// failure, doubling with each one up to retryPauseMax. Each call is bounded
// by callTimeout already, but an etcd can fail at once (no leader, a
// connection refused, a transaction it refuses): it is then asked again
// within a tenth of a second at first, then ever less often, at most every
// two seconds, less than a lease, so that a transfer still ends soon after
// etcd answers again.
const (
	retryPauseMin = 100 * time.Millisecond
	retryPauseMax = 2 * time.Second
)

// retryPause is the pause after failed tries (at least 1), less up to half
// of it by r (in [0, 1)): hosts that failed at the same moment do not ask
// again at the same moment.
func retryPause(failed int, r float64) time.Duration {
	d := retryPauseMax
	if shift := failed - 1; shift < 8 {
		d = min(retryPauseMin<<shift, retryPauseMax)
	}
	return d - time.Duration(r*float64(d/2))
}

// call runs a coordinator call on a goroutine of the member, bounded by
// callTimeout, and sends the host the message it returns: the host's
// Receive never waits for etcd.
func (a *hostActor) call(f func(context.Context, coordinator) any) {
	m, self := a.m, a.self
	m.calls.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		m.sys.Root.Send(self, f(ctx, m.coord))
	})
}

// hostSink is the host's outside world: messages to nodes and hosts by the
// cluster, ownership by the coordinator.
type hostSink struct{ a *hostActor }

func (s hostSink) Nudge(to protocol.NodeID, n protocol.Nudge) {
	s.a.m.sys.Root.Send(nodePID(to), protocol.Encode(n))
}

func (s hostSink) Acquire(shard int) {
	s.a.call(func(ctx context.Context, c coordinator) any {
		res, err := c.Acquire(ctx, shard)
		return &hostAcquireResult{shard: shard, res: res, err: err}
	})
}

func (s hostSink) Transfer(shards []int, epochs []uint64, to protocol.HostInfo) {
	s.a.transfer(shards, epochs, to, 0)
}

func (s hostSink) SendHandoff(to protocol.HostID, h protocol.Handoff) {
	s.a.m.sys.Root.Send(hostPID(to), protocol.Encode(h))
}

func (s hostSink) SendHandoffAck(to protocol.HostID, ack protocol.HandoffAck) {
	s.a.m.sys.Root.Send(hostPID(to), protocol.Encode(ack))
}
