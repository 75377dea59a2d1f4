package benchkit

import (
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/connactor/connactor/client"
)

func TestQuantileTakesTheSampleOfItsNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 1000; i++ {
		s = append(s, time.Duration(1001-i)) // in reverse: Quantile wants them sorted
	}
	slices.Sort(s)
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500}, {0.9, 900}, {0.99, 990}, {0.999, 999}, {1, 1000}, {0.0001, 1}, {0, 1}} {
		if got := Quantile(s, tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := Quantile(nil, 0.5); got != 0 {
		t.Errorf("Quantile of nothing = %v, want 0", got)
	}
}

func TestQuantileForgivesTheRoundingOfItsRank(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i))
	}
	if got := Quantile(s, 0.07); got != 7 { // 0.07*100 = 7.000000000000001
		t.Errorf("Quantile(0.07) of 1..100 = %v, want 7", got)
	}
}

func TestMillisPrintsTheDigitsAsked(t *testing.T) {
	for _, tc := range []struct {
		d        time.Duration
		decimals int
		want     string
	}{{1250 * time.Microsecond, 2, "1.25ms"}, {1250 * time.Microsecond, 1, "1.2ms"}, {200 * time.Millisecond, 0, "200ms"}, {0, 2, "0.00ms"}} {
		if got := Millis(tc.d, tc.decimals); got != tc.want {
			t.Errorf("Millis(%v, %d) = %q, want %q", tc.d, tc.decimals, got, tc.want)
		}
	}
}

func TestVerdictSaysMetOrNotMet(t *testing.T) {
	if Verdict(true) != "met" || Verdict(false) != "NOT MET" {
		t.Errorf("Verdict = %q, %q", Verdict(true), Verdict(false))
	}
}

func TestNiceCeilRoundsUpToTheMantissasGiven(t *testing.T) {
	for _, tc := range []struct {
		v         float64
		mantissas []float64
		want      float64
	}{
		{0, []float64{1, 2, 5}, 1},
		{-3, []float64{1, 2, 5}, 1},
		{1, []float64{1, 2, 5}, 1},
		{2.2, []float64{1, 2, 5}, 5},
		{2.2, []float64{1, 2, 2.5, 5}, 2.5},
		{7, []float64{1, 2, 5}, 10},
		{130, []float64{1, 2, 5}, 200},
		{0.031, []float64{1, 2, 2.5, 5}, 0.05},
	} {
		if got := NiceCeil(tc.v, tc.mantissas...); got != tc.want {
			t.Errorf("NiceCeil(%v, %v) = %v, want %v", tc.v, tc.mantissas, got, tc.want)
		}
	}
}

func TestTrimFloatDropsTheDecimalOfWholeNumbersAndOfRoundedOnesWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		v       float64
		rounded bool
		want    string
	}{
		{3, false, "3"}, {3, true, "3"},
		{2.5, false, "2.5"}, {2.5, true, "2.5"},
		{2.96, false, "3.0"}, {2.96, true, "3"},
		{0.04, false, "0.0"}, {0.04, true, "0"},
		{1000, false, "1000"},
	} {
		if got := TrimFloat(tc.v, tc.rounded); got != tc.want {
			t.Errorf("TrimFloat(%v, %v) = %q, want %q", tc.v, tc.rounded, got, tc.want)
		}
	}
}

// get sends one GET of url through rt and reads its body.
func get(rt http.RoundTripper, url string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// blocking is a handler that says when a request arrived and answers it
// when released.
func blocking() (h http.Handler, arrived, release chan struct{}) {
	arrived, release = make(chan struct{}, 1), make(chan struct{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		arrived <- struct{}{}
		<-release
		w.Write([]byte("ok"))
	}), arrived, release
}

func TestServeStoppedGracefullyFinishesTheAnswerInFlight(t *testing.T) {
	h, arrived, release := blocking()
	url, stop, err := Serve(h, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	got := make(chan error, 1)
	go func() {
		body, err := get(tr, url)
		if err == nil && body != "ok" {
			err = io.ErrUnexpectedEOF
		}
		got <- err
	}()
	<-arrived
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	close(release)
	if err := <-got; err != nil {
		t.Errorf("the answer in flight: %v, want it whole", err)
	}
	<-stopped
	if _, err := get(tr, url); err == nil {
		t.Error("the stopped server answered")
	}
}

func TestServeStoppedAtOnceCutsTheAnswerInFlight(t *testing.T) {
	h, arrived, release := blocking()
	defer close(release)
	url, stop, err := Serve(h, 0)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	got := make(chan error, 1)
	go func() {
		_, err := get(tr, url)
		got <- err
	}()
	<-arrived
	stop()
	if err := <-got; err == nil {
		t.Error("the answer in flight arrived whole, want it cut")
	}
}

func TestConnactorMakesAClientThatItsCloseFunctionCloses(t *testing.T) {
	url, stop, err := Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	rt, closeClient, err := Connactor(client.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if body, err := get(rt, url); err != nil || body != "ok" {
		t.Fatalf("GET = %q, %v", body, err)
	}
	closeClient()
	if _, err := get(rt, url); err == nil {
		t.Error("the closed client sent a request")
	}
}

func TestSampleWhileSamplesUntilTheLoadReturnsAndNeverAfter(t *testing.T) {
	ticks := make(chan struct{}, 1)
	returned := false
	n := 0
	SampleWhile(time.Millisecond, func() {
		if returned {
			t.Error("sampled after the load returned")
		}
		n++
		select {
		case ticks <- struct{}{}:
		default:
		}
	}, func() {
		<-ticks
		<-ticks // two samples while the load runs
	})
	returned = true
	if n < 2 {
		t.Errorf("%d samples, want at least 2", n)
	}
}
