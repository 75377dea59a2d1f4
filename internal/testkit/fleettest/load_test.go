package fleettest

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// scriptedTransport answers each request with the next of its responses,
// whose body ends after eof and whose Close takes closeTakes; once they
// are used up, a request waits until it is cancelled.
type scriptedTransport struct {
	mu        sync.Mutex
	responses []scriptedBody
}

type scriptedBody struct {
	eof, closeTakes time.Duration
}

func (s *scriptedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	if len(s.responses) == 0 {
		s.mu.Unlock()
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	b := s.responses[0]
	s.responses = s.responses[1:]
	s.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{}, Request: req,
		Body: &timedBody{ends: time.Now().Add(b.eof), closeTakes: b.closeTakes}}, nil
}

type timedBody struct {
	ends       time.Time
	closeTakes time.Duration
}

func (b *timedBody) Read([]byte) (int, error) {
	time.Sleep(time.Until(b.ends))
	return 0, io.EOF
}

func (b *timedBody) Close() error {
	time.Sleep(b.closeTakes)
	return nil
}

// FirstServed is when the earliest response was read to its end, whichever
// caller counts its response first: here the response read first is the
// slower to close. Served above 0 means FirstServed is set. Time is
// synctest's.
func TestFirstServedIsTheEarliestResponseReadWhicheverCallerCountsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &scriptedTransport{responses: []scriptedBody{
			{eof: 10 * time.Millisecond, closeTakes: 30 * time.Millisecond}, // read at 10 ms, closed at 40 ms
			{eof: 20 * time.Millisecond},                                    // read and closed at 20 ms
		}}
		l := startLoad(rt, "http://127.0.0.1:1/", 2)
		defer l.Stop()
		synctest.Wait()
		if l.Served() != 0 || l.FirstServed() != 0 {
			t.Fatalf("before any response: served %d, first %v", l.Served(), l.FirstServed())
		}
		time.Sleep(15 * time.Millisecond)
		synctest.Wait()
		if l.Served() != 1 || l.FirstServed() != 10*time.Millisecond {
			t.Errorf("at 15 ms: served %d, first %v; want 1 response, read at 10ms", l.Served(), l.FirstServed())
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		if l.Served() != 2 || l.FirstServed() != 10*time.Millisecond {
			t.Errorf("at 25 ms: served %d, first %v; want 2 responses, the first read at 10ms", l.Served(), l.FirstServed())
		}
		l.Stop()
		if l.FirstServed() != 10*time.Millisecond || l.Failed() != 0 {
			t.Errorf("after Stop: first %v, %d failed; want 10ms and none", l.FirstServed(), l.Failed())
		}
	})
}
