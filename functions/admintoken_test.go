package functions_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// TestAdminTokenSHA256: the list function started with the admin
// token's SHA-256 in ADMIN_TOKEN_SHA256 (and no token, no secret: what a
// stack from zero gives its functions, no Secrets Manager call at run
// time) accepts the admin's bearer, and answers a wrong one exactly as a
// function started with ADMIN_TOKEN does. Its log never carries the hash.
func TestAdminTokenSHA256(t *testing.T) {
	t.Parallel()
	url := pgtest.MustURL(t)
	sum := sha256.Sum256([]byte(adminToken))
	hashed := start(t, "list", "DATABASE_URL="+url, "ADMIN_TOKEN_SHA256="+hex.EncodeToString(sum[:]))
	plain := start(t, "list", dbEnv(url)...)
	listAs := func(rt *lambdatest.Runtime, bearer string) httpResponse {
		t.Helper()
		return invokeHTTP(t, rt, bytes.ReplaceAll(readEvent(t, "list"), []byte("Bearer "+adminToken), []byte("Bearer "+bearer)))
	}
	if got := listAs(hashed, adminToken); got.StatusCode != http.StatusOK {
		t.Fatalf("the admin's bearer: got %d %s, want 200", got.StatusCode, got.Body)
	}
	wrong := adminToken + "-not"
	got, want := listAs(hashed, wrong), listAs(plain, wrong)
	if got.StatusCode != http.StatusUnauthorized || got.StatusCode != want.StatusCode || got.Body != want.Body {
		t.Errorf("a wrong bearer: got %d %s, want %d %s (as with ADMIN_TOKEN)", got.StatusCode, got.Body, want.StatusCode, want.Body)
	}
	if strings.Contains(hashed.Logs(), hex.EncodeToString(sum[:])) {
		t.Errorf("the function's log carries ADMIN_TOKEN_SHA256")
	}
}
