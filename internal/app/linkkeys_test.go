package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// TestLinkKeyRotation: two instances of the content function's service
// on one database and one DOWNLOAD_LINK_KEY_SECRET_ARN (moto's Secrets
// Manager), one started before the secret's rotation (a new value put,
// as docs/operating.md says) and one after: a link minted by either
// opens on the other during the overlap, the one started before reading
// the keys again when a link names the new key; after the overlap
// (DOWNLOAD_LINK_TTL plus a minute from the rotation, on a clock moved
// forward) a link of the old key is refused by both, even one whose
// expires is still ahead, and the new key's links open. (Before: a link
// named no key, each instance held the one key it read at its start, and
// the rotation broke every live link.)
func TestLinkKeyRotation(t *testing.T) {
	ctx := context.Background()
	ep := s3test.MustStart(t)
	for _, kv := range ep.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sm := secretsmanager.NewFromConfig(awsCfg, func(o *secretsmanager.Options) { o.BaseEndpoint = aws.String(ep.URL) })
	const k1, k2 = "first-download-link-key-0123456789abcdef", "second-download-link-key-0123456789abcdef"
	created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("links-" + uuid.NewString()), SecretString: aws.String(k1)})
	if err != nil {
		t.Fatal(err)
	}
	dbURL := pgtest.MustURL(t)
	const admin = "link-rotation-admin-token"
	ttl := 5 * time.Minute
	// One clock for both instances' links: the real one, moved forward
	// past the overlap when the test says.
	var ahead atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	start := func() (*app.App, *httptest.Server) {
		t.Helper()
		cfg, err := config.Load(func(k string) string {
			return map[string]string{"DATABASE_URL": dbURL, "ADMIN_TOKEN": admin, "DOWNLOAD_LINK_KEY_SECRET_ARN": *created.ARN,
				"DOWNLOAD_LINK_TTL": ttl.String(), "SECRETS_MANAGER_ENDPOINT": ep.URL,
				// The admin stages for a workspace no token was made for.
				"ACCEPT_UNKNOWN_WORKSPACES": "true"}[k]
		}, config.NeedDatabase|config.NeedAdminToken|config.NeedLinkKey)
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.New(ctx, cfg, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Secrets: sm})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		a.API.Links.Now = clock
		srv := httptest.NewServer(a.API.Mux())
		t.Cleanup(srv.Close)
		return a, srv
	}

	before, beforeSrv := start()
	ws := uuid.New()
	recs, err := before.Store.Stage(ctx, auth.AdminIdentity(), ws, []pendinguploads.File{{Content: []byte("rotated"), Filename: "r.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	file := recs[0].FileID
	path := "/workspaces/" + ws.String() + "/pending-uploads/" + file.String() + "/"
	mint := func(srv *httptest.Server) string {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+path+"link", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var l struct{ URL string }
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || resp.StatusCode != 200 {
			t.Fatalf("link: %d, %v", resp.StatusCode, err)
		}
		return strings.TrimPrefix(l.URL, "download?")
	}
	open := func(srv *httptest.Server, query string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path + "download?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	byBefore := mint(beforeSrv)
	if !strings.Contains(byBefore, downloadlink.ParamKey+"="+downloadlink.KeyID(k1)) {
		t.Fatalf("a link before the rotation: %s, want key %s", byBefore, downloadlink.KeyID(k1))
	}
	// A link of the old key that expires long after the overlap: refused
	// then for its key alone.
	longLived, err := downloadlink.New(k1, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	long, err := longLived.Sign(ctx, ws, file)
	if err != nil {
		t.Fatal(err)
	}

	// The rotation: a new value put; AWSCURRENT moves to it, AWSPREVIOUS
	// to the value it replaced.
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: created.ARN, SecretString: aws.String(k2)}); err != nil {
		t.Fatal(err)
	}
	_, afterSrv := start()
	byAfter := mint(afterSrv)
	if !strings.Contains(byAfter, downloadlink.ParamKey+"="+downloadlink.KeyID(k2)) {
		t.Fatalf("a link after the rotation: %s, want key %s", byAfter, downloadlink.KeyID(k2))
	}

	for _, c := range []struct {
		name  string
		srv   *httptest.Server
		query string
	}{
		{"BeforesLinkOnAfter", afterSrv, byBefore},
		{"AftersLinkOnBefore", beforeSrv, byAfter},
		{"OldKeyLongLinkOnAfter", afterSrv, long.Query},
		{"BeforesLinkOnBefore", beforeSrv, byBefore},
	} {
		if code, body := open(c.srv, c.query); code != 200 || body != "rotated" {
			t.Errorf("during the overlap, %s: %d %q, want 200 and the file", c.name, code, body)
		}
	}

	ahead.Store(int64(ttl + downloadlink.KeysMaxAge + time.Second))
	for _, c := range []struct {
		name  string
		srv   *httptest.Server
		query string
		want  int
	}{
		{"OldKeyLongLinkOnAfter", afterSrv, long.Query, 403},
		{"OldKeyLongLinkOnBefore", beforeSrv, long.Query, 403},
		{"NewKeyOnBefore", beforeSrv, mint(afterSrv), 200},
		{"NewKeyOnAfter", afterSrv, mint(beforeSrv), 200},
	} {
		code, body := open(c.srv, c.query)
		if code != c.want || (c.want == 403 && !strings.Contains(body, "link_invalid")) {
			t.Errorf("after the overlap, %s: %d %s, want %d", c.name, code, body, c.want)
		}
	}
}
