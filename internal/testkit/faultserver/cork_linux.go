package faultserver

import (
	"net"
	"syscall"
)

// cork sets TCP_CORK on nc: writes are held back until the socket is uncorked
// or closed, so the last data and the FIN go out together.
func cork(nc net.Conn, on bool) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	v := 0
	if on {
		v = 1
	}
	rc.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, v)
	})
}
