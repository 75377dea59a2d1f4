package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain runs the example itself when the collector test re-executes this
// binary with CONNACTOR_RUN_EXAMPLE=1, so that the example runs as its own
// process with only the environment to tell it where the collector is.
func TestMain(m *testing.M) {
	if os.Getenv("CONNACTOR_RUN_EXAMPLE") == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// collector returns the OpenTelemetry Collector built by .ci/otelcol.sh: $OTELCOL
// if set, else the script's cache path. It skips (loudly) when there is none and
// CI is not "true"; under CI a missing collector fails the test.
func collector(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("OTELCOL"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("OTELCOL=%s: %v", p, err)
		}
		return p
	}
	script, err := os.ReadFile(filepath.Join("..", "..", ".ci", "otelcol.sh"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(script)
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	p := filepath.Join(cache, "connactor", "otelcol-"+hex.EncodeToString(sum[:])[:12])
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no OpenTelemetry Collector at %s (CI=true): .ci/run must run .ci/otelcol.sh", p)
	}
	t.Skipf("SKIPPED: no OpenTelemetry Collector at %s; build it with .ci/otelcol.sh (several minutes the first time) to run this test", p)
	return ""
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

const collectorConfig = `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  file:
    path: %s
    flush_interval: 100ms
  debug:
    verbosity: basic
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [file, debug]
    metrics:
      receivers: [otlp]
      processors: [batch]
      exporters: [file, debug]
`

func TestExampleExportsSpansAndMetricsToACollector(t *testing.T) {
	bin := collector(t)
	dir := t.TempDir()
	port := freePort(t)
	outFile := filepath.Join(dir, "telemetry.jsonl")
	cfgFile := filepath.Join(dir, "collector.yaml")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf(collectorConfig, port, outFile)), 0o644); err != nil {
		t.Fatal(err)
	}

	var colLog bytes.Buffer
	col := exec.Command(bin, "--config", "file:"+cfgFile)
	col.Stdout, col.Stderr = &colLog, &colLog
	if err := col.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		col.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- col.Wait() }() // owned by this test: ends when the collector exits
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			col.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("collector output:\n%s", colLog.String())
		}
	}()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector does not listen on %s: %v\n%s", addr, err, colLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ex := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	ex.Env = append(os.Environ(), "CONNACTOR_RUN_EXAMPLE=1", "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+addr)
	out, err := ex.CombinedOutput()
	t.Logf("example output:\n%s", out)
	if err != nil {
		t.Fatalf("the example failed: %v", err)
	}
	if !bytes.Contains(out, []byte("failed: 0")) {
		t.Fatal("the example's requests failed")
	}

	// The collector batches and flushes on its own schedule: poll its file.
	var got exported
	deadline = time.Now().Add(20 * time.Second)
	for {
		got = readExported(t, outFile)
		if got.complete() || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !got.complete() {
		t.Fatalf("the collector's file lacks telemetry: %d client spans (%d with status 200), %d with parent, metrics %v",
			got.clientSpans, got.ok200, got.withParent, got.metrics)
	}
}

// exported is what the test looks for in the collector's file output.
type exported struct {
	clientSpans, ok200, withParent, appSpans int
	service                                  bool
	metrics                                  map[string]bool
	closeReasons                             map[string]bool
}

var wantMetrics = []string{
	"http.client.request.duration", "http.client.active_requests", "http.client.open_connections",
	"http.client.connection.duration", "connactor.lease.wait.duration", "connactor.lease.pending",
	"connactor.connection.opened", "connactor.connection.closed",
}

func (e exported) complete() bool {
	for _, m := range wantMetrics {
		if !e.metrics[m] {
			return false
		}
	}
	// The example makes 36 requests, 32 of them under its "example.batch" span.
	return e.service && e.clientSpans >= 36 && e.ok200 >= 36 && e.withParent >= 32 && e.appSpans == 1 &&
		e.closeReasons["lru_eviction"] && e.closeReasons["idle_expiry"]
}

// OTLP/JSON as the file exporter writes it: one export request per line.
type otlpAttr struct {
	Key   string `json:"key"`
	Value struct {
		StringValue *string `json:"stringValue"`
		IntValue    *string `json:"intValue"`
	} `json:"value"`
}

type otlpLine struct {
	ResourceSpans []struct {
		Resource   struct{ Attributes []otlpAttr } `json:"resource"`
		ScopeSpans []struct {
			Spans []struct {
				Name         string     `json:"name"`
				Kind         int        `json:"kind"`
				ParentSpanID string     `json:"parentSpanId"`
				Attributes   []otlpAttr `json:"attributes"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
	ResourceMetrics []struct {
		ScopeMetrics []struct {
			Metrics []struct {
				Name string `json:"name"`
				Sum  *struct {
					DataPoints []struct {
						Attributes []otlpAttr `json:"attributes"`
					} `json:"dataPoints"`
				} `json:"sum"`
			} `json:"metrics"`
		} `json:"scopeMetrics"`
	} `json:"resourceMetrics"`
}

func attr(as []otlpAttr, key string) string {
	for _, a := range as {
		if a.Key == key {
			switch {
			case a.Value.StringValue != nil:
				return *a.Value.StringValue
			case a.Value.IntValue != nil:
				return *a.Value.IntValue
			}
		}
	}
	return ""
}

func readExported(t *testing.T, path string) exported {
	e := exported{metrics: map[string]bool{}, closeReasons: map[string]bool{}}
	f, err := os.Open(path)
	if err != nil {
		return e // not written yet
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l otlpLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue // a line being written
		}
		for _, rs := range l.ResourceSpans {
			if attr(rs.Resource.Attributes, "service.name") == ServiceName {
				e.service = true
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					if s.Name == "example.batch" {
						e.appSpans++
					}
					if s.Name != "GET" || s.Kind != 3 { // SPAN_KIND_CLIENT
						continue
					}
					e.clientSpans++
					if attr(s.Attributes, "http.response.status_code") == "200" &&
						attr(s.Attributes, "server.address") == "127.0.0.1" &&
						strings.HasPrefix(attr(s.Attributes, "url.full"), "http://127.0.0.1:") {
						e.ok200++
					}
					if s.ParentSpanID != "" {
						e.withParent++
					}
				}
			}
		}
		for _, rm := range l.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					e.metrics[m.Name] = true
					if m.Name == "connactor.connection.closed" && m.Sum != nil {
						for _, dp := range m.Sum.DataPoints {
							e.closeReasons[attr(dp.Attributes, "connactor.connection.close_reason")] = true
						}
					}
				}
			}
		}
	}
	return e
}
