package fleet

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/fleet/internal/protocol"
)

// transferFaults is a coordinator whose Transfers fail at once, as an etcd
// that refuses does, fails times for each batch (named by its first shard),
// recording when each try came; done is closed when a batch is tried once
// more, and then passed on.
type transferFaults struct {
	coordinator
	fails int
	done  chan struct{}

	mu    sync.Mutex
	tries map[int][]time.Time
	first int // the batch that got to its last try first
}

func (f *transferFaults) Transfer(ctx context.Context, shards []int, epochs []uint64, to protocol.HostInfo) (transferred, error) {
	f.mu.Lock()
	batch := shards[0]
	f.tries[batch] = append(f.tries[batch], time.Now())
	n := len(f.tries[batch])
	if n == f.fails+1 && f.first < 0 {
		f.first = batch
		close(f.done)
	}
	f.mu.Unlock()
	if n <= f.fails {
		return transferred{}, errDown
	}
	return f.coordinator.Transfer(ctx, shards, epochs, to)
}

// nopEvents is the events sink of a host registered in the coordinator with
// no member behind it.
type nopEvents struct{}

func (nopEvents) Registry(*protocol.Registry) {}
func (nopEvents) Confirmed(int64, time.Time)  {}
func (nopEvents) SessionLost()                {}

func TestRetryPauseDoublesUpToItsCapLessAJitterOfUpToHalf(t *testing.T) {
	for _, tc := range []struct {
		failed int
		r      float64
		want   time.Duration
	}{
		{1, 0, 100 * time.Millisecond},
		{1, 0.5, 75 * time.Millisecond},
		{1, 0.999999, 50*time.Millisecond + 50*time.Nanosecond},
		{2, 0, 200 * time.Millisecond},
		{3, 0, 400 * time.Millisecond},
		{5, 0, 1600 * time.Millisecond},
		{6, 0, 2 * time.Second},
		{6, 0.5, 1500 * time.Millisecond},
		{40, 0, 2 * time.Second},
		{1 << 30, 0.25, 1750 * time.Millisecond},
	} {
		if got := retryPause(tc.failed, tc.r); got != tc.want {
			t.Errorf("retryPause(%d, %v) = %v, want %v", tc.failed, tc.r, got, tc.want)
		}
	}
}

// A host whose transfer fails at once (etcd refuses it) asks again after a
// pause that grows with each failure, up to its cap, instead of asking in a
// loop; the transfer goes through once etcd takes it. Time is synctest's:
// the pauses are measured exactly.
func TestAHostAsksAgainAboutAFailedTransferAfterAGrowingPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const fails = 7
		c := unstartedCluster(t, NewKind(KindConfig{}))
		sys := c.ActorSystem
		mc := newMemCoord()
		tf := &transferFaults{fails: fails, done: make(chan struct{}), tries: map[int][]time.Time{}, first: -1}
		newCoord := func() coordinator {
			tf.coordinator = mc.member()
			return tf
		}
		b := &Budget{c: c, opt: Options{MaxConnsPerRoute: 12, coord: newCoord}}
		k, err := b.StartKeeper(actors.FleetKeeperConfig{Supervisor: newSupervisorLog(sys).pid, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // alone, the host takes shards (32 a rebalance)
		other := mc.member()
		other.Open("127.0.0.1:1", nopEvents{}) // the shards placed on it move once it has settled
		<-tf.done

		tf.mu.Lock()
		tries := tf.tries[tf.first]
		tf.mu.Unlock()
		for i := 1; i < len(tries); i++ {
			pause := tries[i].Sub(tries[i-1])
			// The retry is due after retryPause (at least half of the
			// doubled pause) and goes out on the next tick.
			full := retryPause(i, 0)
			if pause < full/2 || pause > full+tickInterval {
				t.Errorf("try %d came %v after the failed one, want %v to %v", i+1, pause, full/2, full+tickInterval)
			}
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := other.Close(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if err := k.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		outliveDeadLetterThrottle() // the handoffs to the host with no member were dead letters
	})
}
