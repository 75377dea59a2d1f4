//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package faultserver

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
)

// LastConn dials TCP and remembers the most recent socket, so that a test can
// wait for the server's FIN to reach the client's side of it (WaitFIN): the
// state in which a client must find a re-used connection stale before it
// writes to it. Give its Dial to the client under test. Safe for concurrent
// use.
type LastConn struct {
	mu sync.Mutex
	nc net.Conn
}

// Dial dials addr with a net.Dialer and remembers the socket.
func (l *LastConn) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err == nil {
		l.mu.Lock()
		l.nc = nc
		l.mu.Unlock()
	}
	return nc, err
}

// WaitFIN waits until the last socket holds the server's FIN (or any byte),
// without reading it, or until ctx ends. The runtime's poller wakes the wait
// when the socket turns readable (a peek that finds it empty returns false to
// RawConn.Read, which parks until then). A socket the client closed meanwhile
// counts as readable.
func (l *LastConn) WaitFIN(ctx context.Context) error {
	l.mu.Lock()
	nc := l.nc
	l.mu.Unlock()
	if nc == nil {
		return errors.New("faultserver: no socket dialed")
	}
	rc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		return err
	}
	readable := make(chan struct{})
	go func() { // owned by WaitFIN's caller: ends with the FIN, or when the client closes the socket
		defer close(readable)
		var buf [1]byte
		rc.Read(func(fd uintptr) bool {
			_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return err != syscall.EAGAIN
		})
	}()
	select {
	case <-readable:
		return nil
	case <-ctx.Done():
		return errors.New("faultserver: the server's FIN never arrived: " + ctx.Err().Error())
	}
}
