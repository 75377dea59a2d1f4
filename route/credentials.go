package route

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"sync"
	"sync/atomic"
)

// Credentials holds the proxy credentials of a client's routes, keyed by proxy
// and credential hash, so that route keys (which name routes in logs and Stats)
// never carry them. FromRequest fills it (through Options.Credentials); the dial
// reads it with Lookup. Entries live as long as the store: a client keeps one for
// its lifetime, as it keeps its Proxy function. Safe for concurrent use; the
// zero value is ready to use.
type Credentials struct {
	mu sync.RWMutex
	m  map[credKey]*url.Userinfo
	// last memoises the last user info hashed: proxy functions usually return the
	// same *url.URL every time (http.ProxyURL, http.ProxyFromEnvironment), and a
	// *url.Userinfo never changes, so the hash is computed once per URL.
	last atomic.Pointer[credMemo]
}

type credKey struct{ proxy, auth string }

type credMemo struct {
	proxy string
	u     *url.Userinfo
	auth  string
}

// Lookup returns the user info remembered for k's proxy and k.ProxyAuth, or nil
// when k has no proxy credentials or none were remembered. It does not block
// beyond a read lock and is safe for concurrent use. A nil store has none.
func (c *Credentials) Lookup(k Key) *url.Userinfo {
	if c == nil || k.ProxyAuth == "" {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[credKey{k.Proxy, k.ProxyAuth}]
}

// remember stores u for proxy (when c is not nil) and returns its hash, the
// key's ProxyAuth.
func (c *Credentials) remember(proxy string, u *url.Userinfo) string {
	if c == nil {
		return proxyAuth(u)
	}
	if m := c.last.Load(); m != nil && m.u == u && m.proxy == proxy {
		return m.auth
	}
	auth := proxyAuth(u)
	k := credKey{proxy, auth}
	c.mu.RLock()
	_, ok := c.m[k]
	c.mu.RUnlock()
	if !ok {
		c.mu.Lock()
		if c.m == nil {
			c.m = map[credKey]*url.Userinfo{}
		}
		c.m[k] = u
		c.mu.Unlock()
	}
	c.last.Store(&credMemo{proxy: proxy, u: u, auth: auth})
	return auth
}

// authKey keys the credential hash. It is random per process, so a route name in
// a log or a Stats snapshot gives nothing to test password guesses against.
var authKey = func() []byte {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return b
}()

// proxyAuth is the key's ProxyAuth for user info u: 128 bits of
// HMAC-SHA256(authKey, u) in hex. Collisions (two credentials sharing a route,
// and so a proxy's authorisation) are out of reach at that length.
func proxyAuth(u *url.Userinfo) string {
	m := hmac.New(sha256.New, authKey)
	m.Write([]byte(u.String()))
	return hex.EncodeToString(m.Sum(nil)[:16])
}
