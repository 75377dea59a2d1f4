package route

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/http/httpproxy"
)

func keyOf(t *testing.T, target, proxy, id string, creds *Credentials) Key {
	t.Helper()
	req, err := http.NewRequest("GET", target, nil)
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{Credentials: creds}
	if proxy != "" {
		pu, err := url.Parse(proxy)
		if err != nil {
			t.Fatal(err)
		}
		opt.Proxy = http.ProxyURL(pu)
	}
	k, err := FromRequest(req, id, opt)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyNamesRouteReadablyWithoutCredentials(t *testing.T) {
	for _, tc := range []struct {
		target, proxy, id, want string
	}{
		{"https://API.example/x", "", "", "https://api.example:443"},
		{"https://api.example/x", "http://proxy:3128", "alice", "https://api.example:443 via http://proxy:3128 as alice"},
		{"http://api.example:8080/", "socks5://Proxy", "", "http://api.example:8080 via socks5://proxy:1080"},
		{"http://[::1]/", "https://proxy", "", "http://[::1]:80 via https://proxy:443"},
	} {
		if got := keyOf(t, tc.target, tc.proxy, tc.id, nil).String(); got != tc.want {
			t.Errorf("%s via %q as %q: String() = %q, want %q", tc.target, tc.proxy, tc.id, got, tc.want)
		}
	}
	k := keyOf(t, "https://api.example/", "http://alice:s3cret@proxy:3128", "", nil)
	if s := k.String(); !strings.HasPrefix(s, "https://api.example:443 via http://proxy:3128 (auth ") ||
		strings.Contains(s, "alice") || strings.Contains(s, "s3cret") {
		t.Fatalf("String() = %q: want the proxy and a credential hash, never the user or password", s)
	}
}

func TestDifferentProxyCredentialsAreDifferentRoutes(t *testing.T) {
	const target = "https://api.example/"
	a1 := keyOf(t, target, "http://alice:s3cret@proxy:3128", "", nil)
	a2 := keyOf(t, target, "http://alice:s3cret@proxy:3128", "", nil)
	b := keyOf(t, target, "http://bob:s3cret@proxy:3128", "", nil)
	a3 := keyOf(t, target, "http://alice:other@proxy:3128", "", nil)
	none := keyOf(t, target, "http://proxy:3128", "", nil)
	if a1 != a2 {
		t.Fatalf("same credentials, different keys: %v / %v", a1, a2)
	}
	for _, k := range []Key{b, a3, none} {
		if k == a1 {
			t.Fatalf("key %v equals %v although the credentials differ", k, a1)
		}
	}
	if len(a1.ProxyAuth) != 32 || strings.Contains(a1.ProxyAuth, "s3cret") {
		t.Fatalf("ProxyAuth %q: want 128 bits of keyed hash in hex", a1.ProxyAuth)
	}
}

func TestCredentialsAreRememberedForTheDialOnly(t *testing.T) {
	creds := &Credentials{}
	pu, _ := url.Parse("http://alice:s3cret@proxy:3128")
	req, _ := http.NewRequest("GET", "https://api.example/", nil)
	opt := Options{Proxy: http.ProxyURL(pu), Credentials: creds}
	k, err := FromRequest(req, "", opt)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := FromRequest(req, "", opt) // memoised: same *url.Userinfo
	if again != k {
		t.Fatalf("keys differ on the memoised path: %v / %v", k, again)
	}
	u := creds.Lookup(k)
	if pw, _ := u.Password(); u == nil || u.Username() != "alice" || pw != "s3cret" {
		t.Fatalf("Lookup(%v) = %v, want alice's credentials", k, u)
	}
	other := k
	other.ProxyAuth = strings.Repeat("0", 32)
	if u := creds.Lookup(other); u != nil {
		t.Fatalf("Lookup with another hash = %v, want nil", u)
	}
	if u := creds.Lookup(keyOf(t, "https://api.example/", "", "", creds)); u != nil {
		t.Fatalf("Lookup of a direct route = %v, want nil", u)
	}
	var none *Credentials
	if u := none.Lookup(k); u != nil {
		t.Fatalf("nil store Lookup = %v", u)
	}
}

func TestEachIdentityIsItsOwnRoute(t *testing.T) {
	alice := keyOf(t, "https://api.example/", "", "alice", nil)
	bob := keyOf(t, "https://api.example/", "", "bob", nil)
	anon := keyOf(t, "https://api.example/", "", "", nil)
	if alice == bob || alice == anon || bob == anon {
		t.Fatalf("identities share a key: %v %v %v", alice, bob, anon)
	}
	if got := alice.String(); got != "https://api.example:443 as alice" {
		t.Fatalf("String() = %q", got)
	}
}

func TestProxyAccessorsSayHowRequestsAreWritten(t *testing.T) {
	for _, tc := range []struct {
		target, proxy      string
		scheme, addr, host string
		absolute           bool
	}{
		{"http://a.example/", "", "", "", "", false},
		{"http://a.example/", "http://proxy:3128", "http", "proxy:3128", "proxy", true},
		{"http://a.example/", "https://Proxy", "https", "proxy:443", "proxy", true},
		{"https://a.example/", "http://proxy:3128", "http", "proxy:3128", "proxy", false},
		{"http://a.example/", "socks5://[::1]:1080", "socks5", "[::1]:1080", "::1", false},
		{"http://a.example/", "socks5h://proxy", "socks5h", "proxy:1080", "proxy", false},
	} {
		k := keyOf(t, tc.target, tc.proxy, "", nil)
		if k.ProxyScheme() != tc.scheme || k.ProxyAddr() != tc.addr || k.ProxyHost() != tc.host || k.AbsoluteForm() != tc.absolute {
			t.Errorf("%s via %q: scheme %q addr %q host %q absolute %v; want %q %q %q %v", tc.target, tc.proxy,
				k.ProxyScheme(), k.ProxyAddr(), k.ProxyHost(), k.AbsoluteForm(), tc.scheme, tc.addr, tc.host, tc.absolute)
		}
	}
}

func TestNoProxyHostsRouteDirect(t *testing.T) {
	// http.ProxyFromEnvironment reads the environment once per process; its
	// rules are httpproxy.Config's, used here with a fixed configuration.
	cfg := &httpproxy.Config{HTTPProxy: "http://proxy:3128", HTTPSProxy: "http://proxy:3128", NoProxy: "internal.example,.corp.example"}
	pf := cfg.ProxyFunc()
	opt := Options{Proxy: func(r *http.Request) (*url.URL, error) { return pf(r.URL) }}
	for target, want := range map[string]string{
		"https://api.example/":      "http://proxy:3128",
		"http://internal.example/":  "",
		"https://db.corp.example/":  "",
		"https://corp.example.org/": "http://proxy:3128",
	} {
		req, _ := http.NewRequest("GET", target, nil)
		k, err := FromRequest(req, "", opt)
		if err != nil {
			t.Fatal(err)
		}
		if k.Proxy != want {
			t.Errorf("%s: proxy %q, want %q", target, k.Proxy, want)
		}
	}
}

func TestUnsupportedProxySchemesAreRefused(t *testing.T) {
	req, _ := http.NewRequest("GET", "https://api.example/", nil)
	pu, _ := url.Parse("ftp://proxy:21")
	if _, err := FromRequest(req, "", Options{Proxy: http.ProxyURL(pu)}); !errors.Is(err, ErrUnsupportedProxy) || !strings.Contains(err.Error(), "ftp") {
		t.Fatalf("err = %v, want ErrUnsupportedProxy naming ftp", err)
	}
}

func BenchmarkFromRequestThroughAProxyWithCredentials(b *testing.B) {
	pu, _ := url.Parse("http://alice:s3cret@proxy:3128")
	req, _ := http.NewRequest("GET", "https://api.example/x", nil)
	opt := Options{Proxy: http.ProxyURL(pu), Credentials: &Credentials{}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromRequest(req, "alice", opt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFromRequestDirect(b *testing.B) {
	req, _ := http.NewRequest("GET", "https://api.example/x", nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromRequest(req, "", Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
