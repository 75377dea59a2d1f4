//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package conn

import "syscall"

const canPeek = true

// peek runs on the socket's descriptor under the poller's read lock: a
// one-byte recvfrom that neither waits nor consumes. It never asks the poller
// to wait (returns true).
func (p *idleProbe) peek(fd uintptr) bool {
	p.n, _, p.err = syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true
}
