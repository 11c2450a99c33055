// Package oauth makes Carmy an OAuth 2.0 resource server: it verifies
// JWT access tokens (RFC 9068) that an authorization server issues,
// against the keys that server publishes as a JSON Web Key Set.
//
// A token is accepted when its signature verifies with a key of the set
// (the algorithm is the key's, never only the token's say; "none" and
// shared-secret algorithms are refused), its iss is the configured
// issuer, its aud names the configured audience, and it has not expired
// (exp is required; exp, nbf and iat are compared with a small leeway).
// The keys are cached: fetched on first use (which waits for it), again
// when older than Config.Refresh, in the background while the keys held
// keep serving, and when a token names a key id the set lacks (that token
// waits for the fetch at most UnknownKeyWait); at most one fetch runs,
// and at most one starts per Config.MinRefreshInterval. A failed or hung
// fetch keeps the keys already held and stalls no token of theirs. A token that passed is remembered by its SHA-256 while
// its exp and nbf allow and the keys are those it was verified under.
package oauth
