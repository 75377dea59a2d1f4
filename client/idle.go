package client

// CloseIdleConnections closes every idle connection of every route now
// (connections in use are left alone and stay pooled), as net/http's
// Transport does; http.Client.CloseIdleConnections forwards to it. It blocks
// until every route has closed its idle connections, and is safe for
// concurrent use. On a closed client it does nothing.
func (c *Client) CloseIdleConnections() { c.pool.CloseIdle() }
