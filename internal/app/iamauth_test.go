package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/awsenv"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/rdsiam"
)

// iamRole creates a login role with no password, granted rds_iam and the
// tables of the database of dbURL: RDS's IAM database user.
func iamRole(t *testing.T, dbURL string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	role := "iam_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	for _, sql := range []string{
		`CREATE ROLE ` + role + ` LOGIN`,
		`GRANT rds_iam TO ` + role,
		`GRANT ALL ON ALL TABLES IN SCHEMA public TO ` + role,
		`GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO ` + role,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	return role
}

// TestIAMDatabaseAuth: with DB_IAM_USER the service reaches its database
// through the IAM stand-in (rdsiam: a cleartext password checked as a
// SigV4 token, over TLS), and serves an upload and a list; without the
// token (no credentials) a request is a 503, never a 500 or an open
// door.
func TestIAMDatabaseAuth(t *testing.T) {
	dbURL := pgtest.MustURL(t)
	proxy := rdsiam.Start(t, dbURL)
	role := iamRole(t, dbURL)
	u, _ := url.Parse(dbURL)
	env := map[string]string{"ADMIN_TOKEN": "iam-test-admin-token-0123", "ACCEPT_UNKNOWN_WORKSPACES": "true"}
	for _, kv := range proxy.Env(role, strings.TrimPrefix(u.Path, "/")) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	newApp := func(env map[string]string) *app.App {
		t.Helper()
		getenv := func(k string) string { return env[k] }
		cfg, err := config.Load(getenv, config.NeedDatabase|config.NeedAdminToken)
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.New(context.Background(), cfg, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			LoadAWS: func(_ context.Context, log *slog.Logger) (aws.Config, error) { return awsenv.Load(getenv, log) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		return a
	}

	a := newApp(env)
	if strings.Contains(a.DatabaseURL, ":@") || strings.Contains(a.DatabaseURL, "X-Amz") {
		t.Fatalf("DatabaseURL %q carries a password", a.DatabaseURL)
	}
	srv := httptest.NewServer(a.API.Mux())
	defer srv.Close()
	ws := uuid.NewString()
	do := func(req *http.Request) (int, []byte) {
		t.Helper()
		req.Header.Set("Authorization", "Bearer "+env["ADMIN_TOKEN"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("files", "hello.txt")
	fw.Write([]byte("hello through IAM"))
	mw.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/workspaces/"+ws+"/chat/uploads", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if status, b := do(req); status != http.StatusCreated && status != http.StatusOK {
		t.Fatalf("upload: %d %s", status, b)
	}
	a.Pool.Reset() // the list on a new connection: a second token check
	req, _ = http.NewRequest("GET", srv.URL+"/workspaces/"+ws+"/pending-uploads", nil)
	status, b := do(req)
	var list struct {
		Uploads []struct {
			Name string `json:"name"`
		} `json:"uploads"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &list) != nil || len(list.Uploads) != 1 || list.Uploads[0].Name != "hello.txt" {
		t.Fatalf("list: %d %s, want hello.txt", status, b)
	}
	if proxy.Refused() != 0 {
		t.Fatalf("the stand-in refused %d connections", proxy.Refused())
	}

	// No credentials: no token, so no connection; a 503.
	bare := map[string]string{}
	for k, v := range env {
		if !strings.HasPrefix(k, "AWS_") || k == "AWS_REGION" {
			bare[k] = v
		}
	}
	b2 := newApp(bare)
	srv2 := httptest.NewServer(b2.API.Mux())
	defer srv2.Close()
	req, _ = http.NewRequest("GET", srv2.URL+"/workspaces/"+ws+"/pending-uploads", nil)
	req.Header.Set("Authorization", "Bearer "+env["ADMIN_TOKEN"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("without credentials: %d, want 503", resp.StatusCode)
	}
}
