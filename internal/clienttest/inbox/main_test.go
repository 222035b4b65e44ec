package inbox_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustClient(t *testing.T, base, token string) *client.Client {
	t.Helper()
	c, err := client.New(base, token)
	if err != nil {
		t.Fatal(err)
	}
	c.Retry = client.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}
	return c
}

// randomBytes returns n bytes of a seeded generator: fixtures made, not stored.
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
