package protocol

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkLedgerRenewal measures a ledger's work for one renewal of one
// route (a host's work per renewal entry) with 3, 100 and 1,000 holders, when
// the budget covers every need and when it is smaller than the holders
// (rotation). It should grow with the log of the largest need, not with the
// holders.
func BenchmarkLedgerRenewal(b *testing.B) {
	for _, holders := range []int{3, 100, 1000} {
		for _, tc := range []struct {
			name   string
			budget int
		}{{"fits", 4 * holders}, {"rotates", max(1, holders/3)}} {
			b.Run(fmt.Sprintf("holders=%d/%s", holders, tc.name), func(b *testing.B) {
				l := NewLedger("http://10.0.0.1:80")
				nodes := make([]NodeID, holders)
				now := t0
				c := applyCtx{lease: DefaultLease, turn: DefaultLease / 3, retry: DefaultLease / 8}
				for i := range nodes {
					nodes[i] = NodeID(fmt.Sprintf("n%d", i))
					c.now = now
					l.apply(nodes[i], tc.budget, Entry{Need: 1 + i%7, Want: 2 + i%7}, c)
				}
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					now = now.Add(time.Millisecond)
					c.now = now
					n := nodes[i%holders]
					l.apply(n, tc.budget, Entry{Has: 1, Held: 1, Need: 1 + i%5, Want: 2 + i%5}, c)
				}
			})
		}
	}
}
