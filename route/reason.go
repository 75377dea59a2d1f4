package route

// CloseReason says why a connection of a route closed, or stopped taking
// requests (an HTTP/2 connection that drains). It is the one list of reasons:
// the route actor closes for them, conn/h2 reports its own with them, Stats
// count closes by them (ClosedBy) and telemetry labels closes with them.
type CloseReason string

// Reasons a connection closes.
const (
	ReasonIdleExpired  CloseReason = "idle_expiry"       // idle longer than MaxIdleTime
	ReasonLifetime     CloseReason = "lifetime"          // older than MaxLifetime
	ReasonKeepAlive    CloseReason = "keepalive_timeout" // idle past the server's Keep-Alive timeout
	ReasonEvicted      CloseReason = "lru_eviction"      // the least recently used idle one, for another route's room
	ReasonServerClosed CloseReason = "server_close"      // the server closed (or reset) it
	ReasonNotReusable  CloseReason = "not_reusable"      // its exchange left it unfit for another (or its owner closed it)
	ReasonError        CloseReason = "error"             // a read, write or protocol error, or its actor failed
	ReasonDialFailed   CloseReason = "dial_error"        // its dial failed
	ReasonClientClosed CloseReason = "client_close"      // the client closed
	ReasonCloseIdle    CloseReason = "close_idle"        // Client.CloseIdleConnections
	ReasonMaxRequests  CloseReason = "max_requests"      // MaxRequestsPerConn served
	ReasonLearnedIdle  CloseReason = "learned_idle"      // idle close to the server's learned timeout
	ReasonEndpointGone CloseReason = "endpoint_removed"  // its address left the host's resolved set (DNS)

	ReasonFleetShare     CloseReason = "fleet_share"     // above the node's share of a fleet budget
	ReasonGoAway         CloseReason = "goaway"          // HTTP/2: the server's GOAWAY, after the last stream
	ReasonRefusedStreams CloseReason = "refused_streams" // HTTP/2: the server refused two streams
	ReasonPingTimeout    CloseReason = "ping_timeout"    // HTTP/2: the health check's PING went unanswered

	ReasonEjected CloseReason = "endpoint_ejected" // its address was ejected for failed exchanges (Config.Outlier)
)
