package faults_test

import (
	"strings"
	"testing"

	"github.com/connactor/connactor/internal/testkit/realtest"
)

// bigPadding is the size of /big's body: enough for the bandwidth toxic to
// matter, small enough to cross it in a fraction of a second.
const bigPadding = 128 << 10

// startNginx runs a real nginx on a free loopback port (internal/testkit/realtest)
// and stops it when the test ends. Its answers name the request and nginx's
// connection serial number ($connection), so a re-used connection shows:
// "req=<id> conn=<n>\n" at /, and the same followed by bigPadding bytes at
// /big. Under CI=true a missing nginx fails the test; elsewhere it skips,
// loudly.
func startNginx(t *testing.T) (addr string) {
	t.Helper()
	big := "req=@ID@ conn=@CONN@\n" + strings.Repeat("0123456789abcdef", bigPadding/16)
	ng := realtest.StartNginx(t, realtest.NginxConfig{
		HTTP:  "keepalive_requests 100000;",
		Files: map[string]string{"big.html": big},
		Server: `root .;
		location = /big {
			default_type text/html;
			sub_filter '@ID@' '$arg_id';
			sub_filter '@CONN@' '$connection';
			sub_filter_once on;
			try_files /big.html =404;
		}
		location / {
			default_type text/plain;
			return 200 "req=$arg_id conn=$connection\n";
		}`,
	})
	return ng.Addr
}
