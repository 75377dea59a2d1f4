package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/connactor/connactor/fleet/internal/protocol"
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
	// leaving: a graceful stop hands the shards over; done is closed when
	// none is left.
	leaving chan struct{}
}

// Messages to the host actor. No reply, but hostLeaveRequest, answered by
// closing done.
type (
	hostTick          struct{}
	hostLeaveRequest  struct{ done chan struct{} }
	hostAcquireResult struct {
		shard int
		res   acquired
		err   error
	}
	hostTransferResult struct {
		shards []int
		epochs []uint64
		to     protocol.HostInfo
		res    transferred
		err    error
	}
)

var theHostTick = &hostTick{}

func (a *hostActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.onStarted(ctx)
	case *wrapperspb.BytesValue:
		a.onBytes(ctx, m)
	case *hostTick:
		a.h.Tick(time.Now())
		a.checkLeft()
	case *registryChanged:
		a.h.SetRegistry(m.reg, time.Now())
	case *sessionConfirmed:
		a.h.Confirmed(m.session, m.until)
	case *sessionLost:
		a.h.SessionLost()
	case *hostAcquireResult:
		a.onAcquired(m)
	case *hostTransferResult:
		a.onTransferred(m)
	case *hostLeaveRequest:
		a.leaving = m.done
		a.h.Leave(time.Now())
		a.checkLeft()
	case *actor.Stopping:
		if a.stop != nil {
			close(a.stop)
		}
	case *actor.Stopped:
		if a.m != nil {
			close(a.m.hostDone)
			a.m.hostStopped()
		}
	case *actor.Restarting:
	default:
		if a.m != nil {
			a.m.logger.Warn("fleet: budget host got an unknown message", slog.String("type", fmt.Sprintf("%T", m)))
		}
	}
}

func (a *hostActor) onStarted(ctx actor.Context) {
	a.self = ctx.Self()
	a.m = lookupMember(ctx.ActorSystem())
	if a.m == nil || a.self.Id != hostName || a.m.host != nil && a.m.host.Id != a.self.Id {
		// Activated through the cluster's identity lookup, which the budget
		// does not use: nothing to host.
		ctx.Logger().Warn("fleet: a budget host was activated by identity; it stops (budget hosts are started by fleet.New)")
		a.m = nil
		ctx.Stop(a.self)
		return
	}
	cfg := protocol.HostConfig{ID: a.m.id, Lease: a.m.kind.Lease}
	a.h = protocol.NewHost(cfg, hostSink{a})
	a.stop = make(chan struct{})
	a.m.ticker(a.self, theHostTick, a.stop)
}

func (a *hostActor) onBytes(ctx actor.Context, b *wrapperspb.BytesValue) {
	msg, err := protocol.Decode(b.GetValue())
	if err != nil {
		a.m.logger.Warn("fleet: budget host got a malformed message", slog.Any("error", fmt.Errorf("%w: %w", ErrBadMessage, err)))
		return
	}
	now := time.Now()
	switch m := msg.(type) {
	case protocol.Renew:
		ctx.Respond(wrap(a.h.HandleRenew(m, now)))
	case protocol.Handoff:
		a.h.ReceiveHandoff(m, now)
	case protocol.HandoffAck:
		a.h.ReceiveHandoffAck(m)
		a.checkLeft()
	default:
		a.m.logger.Warn("fleet: budget host got a message for a keeper", slog.String("type", fmt.Sprintf("%T", m)))
	}
}

func (a *hostActor) onAcquired(m *hostAcquireResult) {
	now := time.Now()
	switch {
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
		// The outcome is unknown (etcd did not answer in time): the shards
		// stay moving, granting nothing, until a new attempt knows.
		a.m.logger.Debug("fleet: a transfer's outcome is unknown; asking again", slog.Any("error", m.err))
		a.transfer(m.shards, m.epochs, m.to)
	case m.res.ok:
		a.h.Transferred(m.shards, m.res.epochs, m.to, now)
	default:
		a.h.TransferFailed(m.shards, m.res.lost, now)
	}
	a.checkLeft()
}

func (a *hostActor) owned(shard int, epoch uint64) {
	if a.m.kind.OnOwned != nil {
		a.m.kind.OnOwned(shard, epoch)
	}
}

// checkLeft ends a graceful stop once no shard is left to hand over.
func (a *hostActor) checkLeft() {
	if a.leaving != nil && a.h.Owned() == 0 && a.h.Pending() == 0 {
		close(a.leaving)
		a.leaving = nil
	}
}

func (a *hostActor) transfer(shards []int, epochs []uint64, to protocol.HostInfo) {
	a.call(func(ctx context.Context, c coordinator) any {
		res, err := c.Transfer(ctx, shards, epochs, to)
		return &hostTransferResult{shards: shards, epochs: epochs, to: to, res: res, err: err}
	})
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

// wrap puts a protocol message into the protobuf value that crosses the
// cluster.
func wrap(msg any) *wrapperspb.BytesValue { return wrapperspb.Bytes(protocol.Encode(msg)) }

// hostSink is the host's outside world: messages to nodes and hosts by the
// cluster, ownership by the coordinator.
type hostSink struct{ a *hostActor }

func (s hostSink) Nudge(to protocol.NodeID, n protocol.Nudge) {
	s.a.m.sys.Root.Send(nodePID(to), wrap(n))
}

func (s hostSink) Acquire(shard int) {
	s.a.call(func(ctx context.Context, c coordinator) any {
		res, err := c.Acquire(ctx, shard)
		return &hostAcquireResult{shard: shard, res: res, err: err}
	})
}

func (s hostSink) Transfer(shards []int, epochs []uint64, to protocol.HostInfo) {
	s.a.transfer(shards, epochs, to)
}

func (s hostSink) SendHandoff(to protocol.HostID, h protocol.Handoff) {
	s.a.m.sys.Root.Send(hostPID(to), wrap(h))
}

func (s hostSink) SendHandoffAck(to protocol.HostID, ack protocol.HandoffAck) {
	s.a.m.sys.Root.Send(hostPID(to), wrap(ack))
}
