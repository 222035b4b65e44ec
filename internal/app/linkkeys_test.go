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
	"github.com/jackc/pgx/v5/pgxpool"

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
	current := k1
	testRotation(t, rotation{
		dbURL: pgtest.MustURL(t),
		env:   map[string]string{"DOWNLOAD_LINK_KEY_SECRET_ARN": *created.ARN, "SECRETS_MANAGER_ENDPOINT": ep.URL},
		opts:  app.Options{Secrets: sm},
		key:   func() string { return current },
		// The rotation: a new value put; AWSCURRENT moves to it,
		// AWSPREVIOUS to the value it replaced.
		rotate: func() {
			if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: created.ARN, SecretString: aws.String(k2)}); err != nil {
				t.Fatal(err)
			}
			current = k2
		},
	})
}

// TestLinkKeyRotationInDatabase is TestLinkKeyRotation with the keys in
// the database (neither DOWNLOAD_LINK_KEY nor its secret set: the
// default, what a stack from zero runs), rotated as docs/operating.md
// says (app.RotateLinkKey, what pendingctl linkkey rotate runs), after a
// first rotation that leaves three keys' worth of history: each rotation
// keeps two rows.
func TestLinkKeyRotationInDatabase(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.MustURL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := app.RotateLinkKey(ctx, pool); err != nil {
		t.Fatal(err)
	}
	key := func() string {
		t.Helper()
		var k string
		if err := pool.QueryRow(ctx, `SELECT key FROM download_link_keys ORDER BY created_at DESC, id DESC LIMIT 1`).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	testRotation(t, rotation{dbURL: dbURL, env: map[string]string{}, key: key, rotate: func() {
		t.Helper()
		old := key()
		r, err := app.RotateLinkKey(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if r.KeyID != downloadlink.KeyID(key()) || r.PreviousKeyID != downloadlink.KeyID(old) || r.Deleted != 1 {
			t.Fatalf("rotated: got %+v, want the new key's id, the old key's as previous, one older key deleted", r)
		}
		var rows int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM download_link_keys`).Scan(&rows); err != nil || rows != 2 {
			t.Fatalf("download_link_keys: %d rows (%v), want 2", rows, err)
		}
	}})
}

// rotation is one source of the link keys for testRotation: the
// database and the variables of the content function's service, the
// current key, and how to rotate it.
type rotation struct {
	dbURL  string
	env    map[string]string
	opts   app.Options
	key    func() string
	rotate func()
}

// testRotation starts an instance before r's rotation and one after, and
// opens each other's links during the overlap and after it.
func testRotation(t *testing.T, r rotation) {
	ctx := context.Background()
	const admin = "link-rotation-admin-token"
	ttl := 5 * time.Minute
	// One clock for both instances' links: the real one, moved forward
	// past the overlap when the test says.
	var ahead atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	start := func() (*app.App, *httptest.Server) {
		t.Helper()
		vars := map[string]string{"DATABASE_URL": r.dbURL, "ADMIN_TOKEN": admin, "DOWNLOAD_LINK_TTL": ttl.String(),
			// The admin stages for a workspace no token was made for.
			"ACCEPT_UNKNOWN_WORKSPACES": "true"}
		for k, v := range r.env {
			vars[k] = v
		}
		cfg, err := config.Load(func(k string) string { return vars[k] }, config.NeedDatabase|config.NeedAdminToken|config.NeedLinkKey)
		if err != nil {
			t.Fatal(err)
		}
		opts := r.opts
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		a, err := app.New(ctx, cfg, opts)
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
	k1 := r.key()
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

	r.rotate()
	k2 := r.key()
	if k2 == k1 {
		t.Fatal("the rotation kept the key")
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

// TestLinkKeysInDatabaseUnreadable: with the keys in the database, a read
// of them that fails when it is due is a 503 (download link keys unavailable,
// with Retry-After), never a link signed or checked with keys that may be
// stale: at a service's first link (it starts without reading them, so
// it starts while its database cannot answer), and once the keys it holds
// are downloadlink.KeysMaxAge old, for a link still within its TTL. When
// the database answers again the same link opens.
func TestLinkKeysInDatabaseUnreadable(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.MustURL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// The fault: the table out of the service's reach, and back.
	unreadable := func(on bool) {
		t.Helper()
		from, to := "download_link_keys", "download_link_keys_away"
		if !on {
			from, to = to, from
		}
		if _, err := pool.Exec(ctx, "ALTER TABLE "+from+" RENAME TO "+to); err != nil {
			t.Fatal(err)
		}
	}
	const admin = "link-keys-unreadable-admin"
	cfg, err := config.Load(func(k string) string {
		return map[string]string{"DATABASE_URL": dbURL, "ADMIN_TOKEN": admin, "DOWNLOAD_LINK_TTL": "5m", "ACCEPT_UNKNOWN_WORKSPACES": "true"}[k]
	}, config.NeedDatabase|config.NeedAdminToken|config.NeedLinkKey)
	if err != nil {
		t.Fatal(err)
	}
	unreadable(true)
	a, err := app.New(ctx, cfg, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("a service whose keys cannot be read yet: %v, want it started", err)
	}
	t.Cleanup(a.Close)
	var ahead atomic.Int64
	a.API.Links.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	srv := httptest.NewServer(a.API.Mux())
	t.Cleanup(srv.Close)
	ws := uuid.New()
	recs, err := a.Store.Stage(ctx, auth.AdminIdentity(), ws, []pendinguploads.File{{Content: []byte("kept"), Filename: "k.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	path := srv.URL + "/workspaces/" + ws.String() + "/pending-uploads/" + recs[0].FileID.String() + "/"
	do := func(method, url string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		if method == "POST" {
			req.Header.Set("Authorization", "Bearer "+admin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	unavailable := func(what string, resp *http.Response, body string) {
		t.Helper()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "download link keys unavailable") || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: got %d %s (Retry-After %q), want 503 download link keys unavailable, with Retry-After", what, resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
	}

	resp, body := do("POST", path+"link")
	unavailable("the first link, keys unread", resp, body)

	unreadable(false)
	ahead.Store(int64(downloadlink.ReloadEvery)) // past the failed read's pause
	resp, body = do("POST", path+"link")
	if resp.StatusCode != 200 {
		t.Fatalf("a link once the keys are readable: %d %s", resp.StatusCode, body)
	}
	var l struct{ URL string }
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		t.Fatal(err)
	}
	link := path + l.URL
	if resp, body = do("GET", link); resp.StatusCode != 200 || body != "kept" {
		t.Fatalf("the link: %d %q, want 200", resp.StatusCode, body)
	}

	// The keys held are due (KeysMaxAge old), the link not expired.
	unreadable(true)
	ahead.Store(int64(downloadlink.ReloadEvery + downloadlink.KeysMaxAge))
	resp, body = do("GET", link)
	unavailable("a live link, keys due and unreadable", resp, body)
	resp, body = do("POST", path+"link")
	unavailable("a new link, keys due and unreadable", resp, body)

	unreadable(false)
	ahead.Store(int64(2*downloadlink.ReloadEvery + downloadlink.KeysMaxAge))
	if resp, body = do("GET", link); resp.StatusCode != 200 || body != "kept" {
		t.Errorf("the link, the database back: %d %q, want 200", resp.StatusCode, body)
	}
}
