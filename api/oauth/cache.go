package oauth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// CacheSize bounds the verified tokens a Verifier remembers.
const CacheSize = 4096

// verified is a token that passed, as remembered: its identity, the
// window its nbf and exp allow, and the key set generation it was
// verified under.
type verified struct {
	id        Identity
	notBefore time.Time // zero: no nbf
	gen       uint64
}

// tokenCache remembers verified tokens by their SHA-256, so that a client
// that sends one token with every request pays for its signature once. An
// entry serves only while its token's time window holds and the key set
// is the one it was verified under: a fetch that changes the keys
// forgets them all.
type tokenCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]verified
}

func newTokenCache() *tokenCache {
	return &tokenCache{entries: make(map[[sha256.Size]byte]verified)}
}

// get returns the identity of the token of digest sum if it was verified
// under key set generation gen and is valid at now.
func (c *tokenCache) get(sum [sha256.Size]byte, gen uint64, now time.Time) (Identity, bool) {
	c.mu.Lock()
	e, ok := c.entries[sum]
	c.mu.Unlock()
	switch {
	case !ok || e.gen != gen:
		return Identity{}, false
	case now.After(e.id.Expiry.Add(Leeway)):
		return Identity{}, false
	case !e.notBefore.IsZero() && now.Add(Leeway).Before(e.notBefore):
		return Identity{}, false
	}
	return e.id, true
}

// put remembers a verified token, dropping an arbitrary entry when full.
func (c *tokenCache) put(sum [sha256.Size]byte, e verified) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= CacheSize {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[sum] = e
}
