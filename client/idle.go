package client

import (
	"github.com/connactor/connactor/actors"
)

// CloseIdleConnections closes every idle connection of every route now
// (connections in use are left alone and stay pooled), as net/http's
// Transport does; http.Client.CloseIdleConnections forwards to it. It blocks
// until every route has closed its idle connections, and is safe for
// concurrent use. On a closed client it does nothing.
func (c *Client) CloseIdleConnections() {
	if c.isClosed() {
		return
	}
	sr, ok := c.supervisorStats()
	if !ok {
		return
	}
	replies := make([]chan int, len(sr.Routes))
	for i, h := range sr.Routes {
		replies[i] = make(chan int, 1)
		c.sys.Root.Send(h.PID, &actors.CloseIdleRequest{Reply: replies[i]})
	}
	for i, h := range sr.Routes {
		select {
		case <-replies[i]:
		case <-h.Done:
		case <-c.closed:
			return
		}
	}
}
