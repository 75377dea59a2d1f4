package faultserver

import (
	"context"
	"encoding/binary"
	"io"
	"net"

	"golang.org/x/net/dns/dnsmessage"
)

// NXDomainResolver returns a resolver whose every query is answered "no such
// name" (NXDOMAIN) inside the process: its Dial hands the Go resolver one end of
// a net.Pipe, and a goroutine answers on the other. No DNS packet leaves the
// machine, whatever /etc/resolv.conf names, so a test of a .invalid host (RFC
// 6761 section 6.4: never resolves) sends nothing anywhere. /etc/hosts is still
// read first, as the Go resolver does.
func NXDomainResolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			client, server := net.Pipe()
			go answerNXDomain(server) // owned by the resolver: ends when it closes its end
			return client, nil
		},
	}
}

// answerNXDomain serves DNS over a stream (two-byte length prefix, RFC 1035
// section 4.2.2: net.Pipe is no PacketConn, so the resolver frames its queries
// that way), answering each query with its question and RCode NameError.
func answerNXDomain(c net.Conn) {
	defer c.Close()
	var lenBuf [2]byte
	for {
		if _, err := io.ReadFull(c, lenBuf[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(lenBuf[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(q)
		if err != nil {
			return
		}
		qs, err := p.AllQuestions()
		if err != nil {
			return
		}
		b := dnsmessage.NewBuilder(make([]byte, 2, 514), dnsmessage.Header{
			ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired,
			RecursionAvailable: true, RCode: dnsmessage.RCodeNameError,
		})
		b.EnableCompression()
		if err := b.StartQuestions(); err != nil {
			return
		}
		for _, q := range qs {
			if err := b.Question(q); err != nil {
				return
			}
		}
		msg, err := b.Finish()
		if err != nil {
			return
		}
		binary.BigEndian.PutUint16(msg, uint16(len(msg)-2))
		if _, err := c.Write(msg); err != nil {
			return
		}
	}
}
