package real_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/testkit/calls"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/internal/testkit/realtest"
)

// chromium returns the path of a headless-capable Chromium ($CHROMIUM first),
// or skips the test loudly when there is none and CI is not "true"; under CI
// a missing Chromium fails the test (.ci/run installs Debian's chromium).
func chromium(t *testing.T) string {
	t.Helper()
	var names []string
	if env := os.Getenv("CHROMIUM"); env != "" {
		names = append(names, env)
	}
	return realtest.Tool(t, "chromium (apt-get install chromium)", append(names, "chromium", "chromium-browser", "google-chrome")...)
}

// artifactDir is where tests leave files for people to look at: $ARTIFACTS_DIR,
// or artifacts/ at the repository root (git-ignored).
func artifactDir(t *testing.T) string {
	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	return abs
}

// runChromium runs headless Chromium with args and returns its stdout.
func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

func TestStatusPageInChromiumShowsTheRoutesWhileRequestsRun(t *testing.T) {
	t.Parallel()
	bin := chromium(t)

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(40 * time.Millisecond) // keeps both connections leased and a queue behind them
		io.WriteString(w, "slow")
	}))
	defer slow.Close()
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "fast") }))
	defer fast.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "other") }))
	defer other.Close()
	c := newClient(t, client.Config{MaxConnsPerRoute: 2, MaxConnsTotal: 3, MaxIdleTime: 300 * time.Millisecond})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	load := func(u string, pause time.Duration) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			calls.Get(context.Background(), c, u)
			time.Sleep(pause)
		}
	}
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go load(slow.URL, 0) // owned by this test: stops on stop, waited by wg
	}
	// Two routes that idle and take turns in the third place under
	// MaxConnsTotal: each evicts the other's idle connection.
	wg.Add(2)
	go load(fast.URL, 100*time.Millisecond)  // owned by this test, as above
	go load(other.URL, 130*time.Millisecond) // owned by this test, as above
	defer func() { close(stop); wg.Wait() }()
	waitUntil(t, "an eviction and a queue on the slow route", func() bool {
		st := c.Stats()
		if st.Evictions == 0 {
			return false
		}
		for _, r := range st.Routes {
			if r.Route == slow.URL && r.Leased == 2 && r.Pending > 0 {
				return true
			}
		}
		return false
	})

	page := httptest.NewServer(http.StripPrefix("/debug", client.StatusHandler(c)))
	defer page.Close()
	pageURL := page.URL + "/debug/connactor/"

	dom := runChromium(t, bin, "--dump-dom", "--virtual-time-budget=3000", pageURL)
	if !bytes.Contains(dom, []byte(`data-loaded="true"`)) {
		t.Fatalf("the page's script did not render the JSON:\n%s", dom)
	}
	row := regexp.MustCompile(`<tr data-route="` + regexp.QuoteMeta(slow.URL) + `">(.*?)</tr>`).FindSubmatch(dom)
	if row == nil {
		t.Fatalf("no row for route %s in the DOM:\n%s", slow.URL, dom)
	}
	field := func(name string) int {
		m := regexp.MustCompile(`data-field="` + name + `">(\d+)<`).FindSubmatch(row[1])
		if m == nil {
			t.Fatalf("no %s cell in the row of %s: %s", name, slow.URL, row[1])
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	if field("max") != 2 || field("leased") != 2 || field("pending") < 1 || field("opened") < 2 {
		t.Errorf("slow route: max %d leased %d pending %d opened %d; want 2, 2, >= 1, >= 2",
			field("max"), field("leased"), field("pending"), field("opened"))
	}
	if !bytes.Contains(dom, []byte(`data-route="`+fast.URL+`"`)) {
		t.Errorf("no row for route %s", fast.URL)
	}
	if !bytes.Contains(dom, []byte(`data-field="maxConnsTotal">3<`)) {
		t.Error("the limits are not shown")
	}
	for _, want := range []string{"lease wait", "lru_eviction"} {
		if !bytes.Contains(dom, []byte(want)) {
			t.Errorf("no recent %s is shown", want)
		}
	}

	shot := filepath.Join(artifactDir(t), "status.png")
	os.Remove(shot)
	runChromium(t, bin, "--screenshot="+shot, "--window-size=1200,800", "--virtual-time-budget=3000", pageURL)
	png, err := os.ReadFile(shot)
	if err != nil || len(png) < 10_000 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s: %d bytes, err %v", shot, len(png), err)
	}
	t.Log(fmt.Sprintf("screenshot of the status page: %s (%d bytes)", shot, len(png)))
}
