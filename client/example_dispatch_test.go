package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/connactor/connactor/client"
)

// Send returns at once; the handler processes each response as it arrives, on
// the client's handler workers, and closes it to release its connection.
func ExampleClient_Send() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Query().Get("name"))
	}))
	defer srv.Close()
	c, err := client.New(client.Config{})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	var mu sync.Mutex
	var wg sync.WaitGroup
	got := map[string]string{}
	handler := client.HandlerFuncs{
		Response: func(h *client.Handle, resp *http.Response) {
			defer wg.Done()
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close() // releases the connection
			mu.Lock()
			got[h.Request().URL.Query().Get("name")] = fmt.Sprintf("%d %s", resp.StatusCode, b)
			mu.Unlock()
		},
		Problem: func(h *client.Handle, err error, fatal bool) bool {
			if fatal {
				defer wg.Done()
				fmt.Println("failed:", err)
			}
			return false // carry on after a non-fatal problem
		},
	}
	for _, name := range []string{"ada", "grace"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"?name="+name, nil)
		wg.Add(1)
		c.Send(req, handler)
	}
	wg.Wait()
	fmt.Println(got["ada"])
	fmt.Println(got["grace"])
	// Output:
	// 200 hello ada
	// 200 hello grace
}

// A Handle can also be awaited; Abort abandons its request at any time, and no
// notification follows.
func ExampleHandle_Abort() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers
	}))
	defer srv.Close()
	c, err := client.New(client.Config{})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	h := c.Send(req, nil)
	h.Abort()
	_, err = h.Await(context.Background())
	fmt.Println(err, h.Linked())
	// Output: connactor: handle aborted false
}

// SendAll fans requests out with bounded concurrency and reads each response
// as it arrives; the results come back in request order.
func ExampleSendAll() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path[1:])
	}))
	defer srv.Close()
	c, err := client.New(client.Config{})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	var reqs []*http.Request
	for _, p := range []string{"one", "two", "three"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/"+p, nil)
		reqs = append(reqs, req)
	}
	bodies, err := client.SendAll(context.Background(), c, reqs, 2, func(resp *http.Response) (string, error) {
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	})
	fmt.Println(bodies, err)
	// Output: [one two three] <nil>
}
