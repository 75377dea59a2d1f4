//go:build !linux

package faultserver

import "net"

// cork does nothing off Linux: WriteAndClose's data and FIN may then travel
// apart, and a client can, rarely, write before it sees the close.
func cork(net.Conn, bool) {}
