package client

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

func TestSmoke(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer srv.Close()
	c, err := New(Config{MaxConnsPerRoute: 2})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: c}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				resp, err := hc.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != "hello" {
					t.Error(string(b))
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%+v", c.Stats())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
