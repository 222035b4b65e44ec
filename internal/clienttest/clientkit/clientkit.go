// Package clientkit is what the client's tests against the whole service
// (internal/clienttest/client, inbox, watch) share: a bounded context, a
// client that retries fast, and fixture bytes made rather than stored.
package clientkit

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/client"
)

// Ctx is a context that ends with t, and after 2 minutes at most.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// MustClient is a client of base with token, retrying 3 times within
// milliseconds (a test's retries need not wait as a workspace's do).
func MustClient(t testing.TB, base, token string) *client.Client {
	t.Helper()
	c, err := client.New(base, token)
	if err != nil {
		t.Fatal(err)
	}
	c.Retry = client.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}
	return c
}

// RandomBytes is n pseudo-random bytes of seed, from ChaCha8 in one Read
// (a byte at a time, 20 MiB cost seconds under -race).
func RandomBytes(n int, seed uint64) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}
