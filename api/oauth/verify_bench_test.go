package oauth_test

import (
	"context"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/carmyhq/carmy/api/oauth/oauthtest"
)

// BenchmarkVerify measures one access token's check with its keys cached.
func BenchmarkVerify(b *testing.B) {
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256} {
		b.Run(string(alg), func(b *testing.B) {
			iss := oauthtest.NewIssuer(b)
			iss.AddKey(b, "k", alg)
			v, err := newBenchVerifier(iss)
			if err != nil {
				b.Fatal(err)
			}
			token := iss.Sign(b, "k", false, iss.Claims("alice", aud, time.Hour))
			ctx := context.Background()
			if _, err := v.Verify(ctx, token); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
