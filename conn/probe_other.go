//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package conn

// canPeek is false where recvfrom(MSG_PEEK|MSG_DONTWAIT) is not available:
// connections get no probe (see idleProbe).
const canPeek = false

func (p *idleProbe) peek(uintptr) bool { return true }
