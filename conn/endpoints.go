package conn

import (
	"context"
	"errors"
	"net"
	"net/http/httptrace"
	"net/netip"
	"strconv"
	"time"
)

// Resolver looks up the addresses of a host name: *net.Resolver is one.
// network is "ip", "ip4" or "ip6". It must return when ctx ends.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Endpoints name the addresses a dial goes to when its route knows its host's
// addresses (the route's endpoint set, which its resolver keeps up to date):
// the host is not resolved again. Primary is dialed first; Fallback, of the
// other address family (zero when there is none to try), is raced against it
// as net.Dialer does for a dual-stack host (Happy Eyeballs, RFC 8305): it
// starts FallbackDelay after the primary, or at once when the primary fails,
// and the first connection wins. Through a proxy they are the proxy's
// addresses. The zero Endpoints dial by name, as net/http does.
type Endpoints struct {
	Primary, Fallback netip.AddrPort
}

// FallbackDelay is how long a dial waits for its primary address before it
// races the fallback one: net.Dialer's default.
const FallbackDelay = 300 * time.Millisecond

// errLostRace cancels the racer of a Happy Eyeballs dial that the other one
// won: its error is not its address's failure.
var errLostRace = errors.New("conn: the other address family connected first")

// dialEndpoints dials to's endpoints (see Endpoints) and records in dl where
// the connection went and which endpoints failed to connect.
func dialEndpoints(ctx context.Context, to Endpoints, opt *Options, dl *dialLog) (net.Conn, error) {
	if !to.Fallback.IsValid() {
		nc, err := dialAddr(ctx, to.Primary, opt)
		if err != nil {
			dl.reached(netip.AddrPort{}, Endpoints{Primary: to.Primary})
			return nil, err
		}
		dl.reached(to.Primary, Endpoints{})
		return nc, nil
	}
	r := dialParallel(ctx, []netip.AddrPort{to.Primary}, []netip.AddrPort{to.Fallback}, opt)
	var failed Endpoints
	if r.failed[0] {
		failed.Primary = to.Primary
	}
	if r.failed[1] {
		failed.Fallback = to.Fallback
	}
	dl.reached(r.peer, failed)
	return r.nc, r.err
}

// resolveDial dials addr (host:port) as net.Dialer does, but looks the host
// up through opt.Resolver: every address of the first one's family in turn,
// raced against those of the other family (dialParallel). The DNSStart and
// DNSDone hooks of a ClientTrace in ctx fire around the lookup, as they do
// in net/http. A failed lookup, or one that finds nothing, is a *net.OpError
// around the resolver's error, as net.Dialer reports it.
func resolveDial(ctx context.Context, addr string, opt *Options, dl *dialLog) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return dialAddr(ctx, netip.AddrPortFrom(ip, uint16(port)), opt)
	}
	trace := httptrace.ContextClientTrace(ctx)
	if trace != nil && trace.DNSStart != nil {
		trace.DNSStart(httptrace.DNSStartInfo{Host: host})
	}
	ips, err := opt.Resolver.LookupNetIP(ctx, "ip", host)
	if err == nil && len(ips) == 0 {
		err = &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if trace != nil && trace.DNSDone != nil {
		info := httptrace.DNSDoneInfo{Err: err}
		for _, ip := range ips {
			info.Addrs = append(info.Addrs, net.IPAddr{IP: ip.AsSlice(), Zone: ip.Zone()})
		}
		trace.DNSDone(info)
	}
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	var primaries, fallbacks []netip.AddrPort
	first := ips[0].Unmap().Is4()
	for _, ip := range ips {
		ip = ip.Unmap()
		if ip.Is4() == first {
			primaries = append(primaries, netip.AddrPortFrom(ip, uint16(port)))
		} else {
			fallbacks = append(fallbacks, netip.AddrPortFrom(ip, uint16(port)))
		}
	}
	r := dialParallel(ctx, primaries, fallbacks, opt)
	dl.reached(r.peer, Endpoints{})
	return r.nc, r.err
}

// race is the outcome of dialParallel: the connection and where it went, or
// the error (the primary addresses' first, as net.Dialer's); failed says
// which side's connects failed on their own (not cancelled because the other
// side won).
type race struct {
	nc     net.Conn
	peer   netip.AddrPort
	err    error
	failed [2]bool // primaries, fallbacks
}

// dialParallel is net.Dialer's dialParallel: primaries in turn, and
// fallbacks in turn once FallbackDelay has passed or the primaries failed;
// the first connection wins and the other racer is cancelled. Unlike
// net.Dialer's, it returns only once both racers have (a losing racer ends at
// once when cancelled): no goroutine outlives the dial.
func dialParallel(ctx context.Context, primaries, fallbacks []netip.AddrPort, opt *Options) race {
	if len(fallbacks) == 0 {
		nc, peer, err := dialSerial(ctx, primaries, opt)
		return race{nc: nc, peer: peer, err: err, failed: [2]bool{err != nil}}
	}
	type result struct {
		nc   net.Conn
		peer netip.AddrPort
		err  error
		side int
		lost bool
	}
	results := make(chan result, 2) // each racer sends once, without blocking
	var cancels [2]context.CancelCauseFunc
	defer func() {
		for _, cancel := range cancels {
			if cancel != nil {
				cancel(nil)
			}
		}
	}()
	running := 0
	start := func(side int) {
		rctx, cancel := context.WithCancelCause(ctx)
		cancels[side] = cancel
		addrs := primaries
		if side == 1 {
			addrs = fallbacks
		}
		running++
		go func() { // owned by dialParallel, which waits for every racer it started
			nc, peer, err := dialSerial(rctx, addrs, opt)
			results <- result{nc: nc, peer: peer, err: err, side: side, lost: context.Cause(rctx) == errLostRace}
		}()
	}
	start(0)
	timer := time.NewTimer(FallbackDelay)
	defer timer.Stop()
	var out race
	var errs [2]error
	for running > 0 {
		select {
		case <-timer.C:
			if cancels[1] == nil && out.nc == nil {
				start(1)
			}
		case res := <-results:
			running--
			switch {
			case res.err == nil && out.nc == nil:
				out.nc, out.peer = res.nc, res.peer
				if other := cancels[1-res.side]; other != nil {
					other(errLostRace)
				}
			case res.err == nil:
				res.nc.Close() // both connected: the first one wins
			default:
				errs[res.side] = res.err
				out.failed[res.side] = !res.lost
				if res.side == 0 && cancels[1] == nil && out.nc == nil {
					timer.Stop()
					start(1) // the primaries failed: no reason to wait
				}
			}
		}
	}
	if out.nc == nil {
		out.err = errs[0]
		if out.err == nil {
			out.err = errs[1]
		}
	}
	return out
}

// dialSerial dials addrs in turn until one connects, each within its share
// of ctx's deadline (net.Dialer's partialDeadline: an equal share, at least
// 2 s); it returns the first error when none connects.
func dialSerial(ctx context.Context, addrs []netip.AddrPort, opt *Options) (net.Conn, netip.AddrPort, error) {
	var firstErr error
	for i, a := range addrs {
		if err := ctx.Err(); err != nil {
			if firstErr == nil {
				firstErr = &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(a), Err: err}
			}
			break
		}
		dctx := ctx
		if deadline, ok := ctx.Deadline(); ok && i < len(addrs)-1 {
			const saneMinimum = 2 * time.Second
			remaining := time.Until(deadline)
			share := max(remaining/time.Duration(len(addrs)-i), min(saneMinimum, remaining))
			var cancel context.CancelFunc
			dctx, cancel = context.WithTimeout(ctx, share)
			defer cancel()
		}
		nc, err := dialAddr(dctx, a, opt)
		if err == nil {
			return nc, a, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("missing address")}
	}
	return nil, netip.AddrPort{}, firstErr
}

// dialAddr dials one address (dialDirect, given "ip:port").
func dialAddr(ctx context.Context, a netip.AddrPort, opt *Options) (net.Conn, error) {
	return dialDirect(ctx, a.String(), opt)
}

// dialDirect dials addr as it is: through opt.DialContext when set, or a
// net.Dialer, which resolves a host name itself and fires a ClientTrace's
// DNS, ConnectStart and ConnectDone hooks.
func dialDirect(ctx context.Context, addr string, opt *Options) (net.Conn, error) {
	if opt.DialContext != nil {
		return opt.DialContext(ctx, "tcp", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}
