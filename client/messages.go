package client

import "github.com/connactor/connactor/actors"

// Request is the message an actor of the embedding service sends to the client
// with ctx.Request(c.PID(), &client.Request{HTTP: req}). The client answers the
// sender with a *Response when the response head arrives (or the request fails);
// the sender's mailbox is never blocked meanwhile. A Request sent without a
// sender (Send instead of Request) is dropped with a warning in the log.
type Request = actors.HTTPRequest

// Response is the client's answer to a Request. HTTP's body streams from the
// connection: the receiving actor reads and closes it, which releases the
// connection. Err is set instead when the request failed.
type Response = actors.HTTPResponse
