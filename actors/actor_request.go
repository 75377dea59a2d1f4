package actors

import (
	"net/http"

	"github.com/asynkron/protoactor-go/actor"
)

// HTTPRequest is sent by an actor of the embedding service to the supervisor
// (client.PID()) with ctx.Request, so that the reply has a sender. The supervisor
// runs the request on a goroutine of the client's and sends an *HTTPResponse to
// the sender when the response head arrives; the sender's mailbox is never
// blocked. The client package names it client.Request.
type HTTPRequest struct {
	HTTP *http.Request
}

// HTTPResponse answers an HTTPRequest: the response (its body streams; the
// receiver reads and closes it, which releases the connection) or an error.
// The client package names it client.Response.
type HTTPResponse struct {
	HTTP *http.Response
	Err  error
}

func (s *Supervisor) onHTTPRequest(ctx actor.Context, m *HTTPRequest) {
	sender := ctx.Sender()
	if sender == nil {
		s.cfg.Logger.Warn("supervisor: Request sent without a sender (use ctx.Request); dropped")
		if m.HTTP != nil && m.HTTP.Body != nil {
			m.HTTP.Body.Close()
		}
		return
	}
	sys, serve := ctx.ActorSystem(), s.cfg.Serve
	s.cfg.Go(func() { // owned by the client's WaitGroup; bounded by the request's context and Close
		resp, err := serve(m.HTTP)
		sys.Root.Send(sender, &HTTPResponse{HTTP: resp, Err: err})
	})
}
