package mailbox

import (
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// BenchmarkPost: one message posted to a mailbox and processed (a trivial
// actor), from 1 sender and from 64 at once; cpu-ns/op is the process's CPU
// time per message (user and system), which a loaded machine disturbs less
// than ns/op.
func BenchmarkPost(b *testing.B) {
	for _, senders := range []int{1, 64} {
		b.Run(map[int]string{1: "senders=1", 64: "senders=64"}[senders], func(b *testing.B) {
			m := New(16)
			m.RegisterHandlers(nopInvoker{}, nil)
			msg := &struct{ n int }{}
			b.ReportAllocs()
			done := cpuPerOp(b)
			if senders == 1 {
				for b.Loop() {
					m.PostUserMessage(msg)
				}
			} else {
				b.SetParallelism(max(1, senders/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						m.PostUserMessage(msg)
					}
				})
			}
			done()
		})
	}
}

type nopInvoker struct{}

func (nopInvoker) InvokeSystemMessage(any)  {}
func (nopInvoker) InvokeUserMessage(any)    {}
func (nopInvoker) EscalateFailure(any, any) {}

var _ actor.MessageInvoker = nopInvoker{}

// cpuPerOp starts measuring the process's CPU time; the function it returns
// reports it per op as cpu-ns/op.
func cpuPerOp(b *testing.B) func() {
	start := cpuNow()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuNow()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
