package app_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// TestAdminTokenSHA256OverHTTP: a service configured with the admin
// token's SHA-256 alone (ADMIN_TOKEN_SHA256, hashed as operators are told
// to: printf %s "$TOKEN" | sha256sum) accepts the admin's bearer on a
// request and answers a wrong bearer as the service configured with
// ADMIN_TOKEN does (401, the same body), whether it is a wrong token
// or the hash itself presented as one.
func TestAdminTokenSHA256OverHTTP(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.MustURL(t)
	const admin = "an-admin-token-for-the-hash-test"
	sum := sha256.Sum256([]byte(admin))
	hash := hex.EncodeToString(sum[:])
	serve := func(vars map[string]string) *httptest.Server {
		t.Helper()
		vars["DATABASE_URL"] = dbURL
		cfg, err := config.Load(func(k string) string { return vars[k] }, config.NeedDatabase|config.NeedAdminToken)
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.New(ctx, cfg, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		srv := httptest.NewServer(a.API.Mux())
		t.Cleanup(srv.Close)
		return srv
	}
	hashed := serve(map[string]string{"ADMIN_TOKEN_SHA256": hash})
	plain := serve(map[string]string{"ADMIN_TOKEN": admin})
	list := func(srv *httptest.Server, bearer string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/workspaces/"+uuid.NewString()+"/pending-uploads", nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := list(hashed, admin); code != http.StatusOK {
		t.Fatalf("the admin's bearer: got %d %s, want 200", code, body)
	}
	for name, bearer := range map[string]string{"WrongToken": admin + "x", "TheHash": hash} {
		t.Run(name, func(t *testing.T) {
			code, body := list(hashed, bearer)
			wantCode, wantBody := list(plain, bearer)
			if code != http.StatusUnauthorized || code != wantCode || body != wantBody {
				t.Errorf("got %d %s, want %d %s (as with ADMIN_TOKEN)", code, body, wantCode, wantBody)
			}
			if strings.Contains(body, hash) {
				t.Errorf("the answer carries the hash: %s", body)
			}
		})
	}
}
