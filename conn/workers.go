package conn

import (
	"context"
	"sync"
	"time"
)

// dialWorkers runs the dials of one client's connections on goroutines that
// outlive a dial: a goroutine whose dial is over waits up to workerIdle for
// the next one before it ends. A dial's goroutine also runs what the dial
// sets off on its way back (the connection actor's dialResult, the route's
// Dialed and the grant to the waiting caller, through inline mailboxes),
// which grows a new goroutine's stack several times; a worker that served a
// dial already has the stack. Under churn (a dial per request) that is most
// of a dial's cost beyond the connect (BenchmarkDial in actors/).
//
// The workers are started with Options.Go (owned by the client, which waits
// for them on Close) and end when the client's lifetime ends. The zero value
// is ready to use; it must not be copied after first use.
type dialWorkers struct {
	once sync.Once
	work chan *dialResult // unbuffered: a send succeeds only when a worker is waiting
}

// workerIdle is how long a dial worker waits for another dial.
const workerIdle = time.Second

// run runs the dial job on an idle worker, or on a new one (started with
// opt.Go) that ends workerIdle after its last dial or when life ends.
func (w *dialWorkers) run(opt *Options, life context.Context, job *dialResult) {
	w.once.Do(func() { w.work = make(chan *dialResult) })
	select {
	case w.work <- job:
		return
	default:
	}
	done := life.Done()
	opt.Go(func() { w.serve(job, done) }) // owned by the client's WaitGroup: ends as said above
}

func (w *dialWorkers) serve(job *dialResult, done <-chan struct{}) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		job.run()
		job = nil // nothing of a finished dial is kept while waiting
		t.Reset(workerIdle)
		select {
		case job = <-w.work:
		case <-t.C:
			return
		case <-done:
			return
		}
	}
}
