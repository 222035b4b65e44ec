package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// TestScans: pendingctl scans lists the files held by malware scanning
// (and only those: not pending, not blocked, not expired), as a table
// and as JSON; with none held it says so and exits 3.
func TestScans(t *testing.T) {
	url := pgtest.MustURL(t)
	vars := map[string]string{"DATABASE_URL": url}
	scans := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"scans"}, args...), func(k string) string { return vars[k] }, &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := scans(); code != exitNothing || !strings.Contains(out, "no file held") {
		t.Fatalf("none held: exit %d, %q", code, out)
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ws, held := uuid.New(), uuid.New()
	for _, r := range []struct {
		id           uuid.UUID
		state, exp   string
		result, name string
	}{
		{held, "held", "now() + interval '1 day'", "UNSUPPORTED", "secret.zip"},
		{uuid.New(), "pending", "now() + interval '1 day'", "", "waiting.bin"},
		{uuid.New(), "blocked", "now() + interval '1 day'", "THREATS_FOUND", "bad.com"},
		{uuid.New(), "held", "now() - interval '1 second'", "FAILED", "gone.bin"},
	} {
		if _, err := pool.Exec(context.Background(), `
			INSERT INTO scanned_uploads (file_id, workspace_id, s3_key, size_bytes, sha256, filename, created_at, expires_at, state, result)
			VALUES ($1, $2, 'objects/x', 3, '\x00', $3, now(), `+r.exp+`, $4, nullif($5, ''))`, r.id, ws, r.name, r.state, r.result); err != nil {
			t.Fatal(err)
		}
	}
	code, out := scans()
	if code != 0 || !strings.Contains(out, held.String()) || !strings.Contains(out, "UNSUPPORTED") || strings.Count(out, ws.String()) != 1 {
		t.Fatalf("table: exit %d:\n%s", code, out)
	}
	code, out = scans("--json")
	var rows []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0]["file_id"] != held.String() || rows[0]["name"] != "secret.zip" {
		t.Fatalf("json: exit %d:\n%s", code, out)
	}
	if code, _ := scans("--limit", "0"); code != exitUsage {
		t.Fatalf("--limit 0: exit %d, want %d", code, exitUsage)
	}
}

// TestScansReleaseAndBlock: pendingctl scans release delivers a held file
// (the workspace lists it, with its activity row), scans block refuses one
// for good and deletes its object from the bucket; each says so on stderr
// (workspace, file, action), and again changes nothing and succeeds. A
// file of another workspace is not found, a file waiting for its scan is
// not held, and neither moves; block without CONTENT_BUCKET is a usage
// error.
func TestScansReleaseAndBlock(t *testing.T) {
	ctx := context.Background()
	url := pgtest.MustURL(t)
	ep := s3test.MustStart(t)
	client, bucket := s3test.NewBucket(t, ep)
	vars := map[string]string{"DATABASE_URL": url, "CONTENT_BUCKET": bucket}
	for _, kv := range ep.Env() {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
		t.Setenv(k, v) // the AWS SDK's configuration reads the process's environment (awsprofile)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	settings := apptest.StoreSettings()
	settings.Scanned = true
	store := pendinguploads.New(pool, s3blobs.NewFromClient(client, bucket), settings)
	ws := uuid.New()
	stage := func(name string, hold bool) pendinguploads.Record {
		t.Helper()
		recs, err := store.Stage(ctx, auth.AdminIdentity(), ws, []pendinguploads.File{{Content: []byte("bytes of " + name), Filename: name}})
		if err != nil {
			t.Fatal(err)
		}
		if hold {
			if _, err := store.Decide(ctx, "objects/"+ws.String()+"/"+recs[0].FileID.String(), pendinguploads.Hold, "UNSUPPORTED", ""); err != nil {
				t.Fatal(err)
			}
		}
		return recs[0]
	}
	rel, blk, waiting := stage("locked.zip", true), stage("odd.bin", true), stage("waiting.txt", false)
	key := func(r pendinguploads.Record) string { return "objects/" + ws.String() + "/" + r.FileID.String() }
	scans := func(vars map[string]string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(ctx, append([]string{"scans"}, args...), func(k string) string { return vars[k] }, &out, &errb)
		return code, out.String(), errb.String()
	}
	listed := func(id uuid.UUID) bool {
		recs, _, err := store.List(ctx, auth.AdminIdentity(), ws, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.FileID == id {
				return true
			}
		}
		return false
	}
	objectGone := func(key string) bool {
		_, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
		var nf *s3types.NotFound
		return errors.As(err, &nf)
	}

	t.Run("NotFound", func(t *testing.T) {
		for _, action := range []string{"release", "block"} {
			code, _, stderr := scans(vars, action, "--workspace", uuid.NewString(), rel.FileID.String())
			if code != exitFailed || !strings.Contains(stderr, "has no file") {
				t.Fatalf("%s under another workspace: exit %d, %q", action, code, stderr)
			}
		}
		if listed(rel.FileID) || objectGone(key(blk)) {
			t.Fatal("a file moved for another workspace's command")
		}
	})
	t.Run("NotHeld", func(t *testing.T) {
		for _, action := range []string{"release", "block"} {
			code, _, stderr := scans(vars, action, "--workspace", ws.String(), waiting.FileID.String())
			if code != exitFailed || !strings.Contains(stderr, "is pending, not held") {
				t.Fatalf("%s of a file waiting for its scan: exit %d, %q", action, code, stderr)
			}
		}
		if listed(waiting.FileID) || objectGone(key(waiting)) {
			t.Fatal("a file waiting for its scan moved")
		}
	})
	t.Run("Release", func(t *testing.T) {
		for i, want := range []string{"released " + rel.FileID.String(), "was delivered already"} {
			code, stdout, stderr := scans(vars, "release", "--workspace", ws.String(), rel.FileID.String())
			if code != 0 || !strings.Contains(stdout, want) || !strings.Contains(stderr, "action=release") ||
				!strings.Contains(stderr, "workspace_id="+ws.String()) || !strings.Contains(stderr, "file_id="+rel.FileID.String()) {
				t.Fatalf("release #%d: exit %d\n%s%s", i+1, code, stdout, stderr)
			}
		}
		var activity int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM activity_logs WHERE request_body->>'file_id' = $1`, rel.FileID.String()).Scan(&activity); err != nil || activity != 1 {
			t.Fatalf("activity rows: %d, %v; want 1", activity, err)
		}
		if !listed(rel.FileID) || objectGone(key(rel)) {
			t.Fatal("released: not listed, or its object gone")
		}
	})
	t.Run("Block", func(t *testing.T) {
		noBucket := maps.Clone(vars)
		delete(noBucket, "CONTENT_BUCKET")
		if code, _, stderr := scans(noBucket, "block", "--workspace", ws.String(), blk.FileID.String()); code != exitUsage || !strings.Contains(stderr, "CONTENT_BUCKET") {
			t.Fatalf("block without the bucket: exit %d, %q", code, stderr)
		}
		for i := range 2 {
			code, stdout, stderr := scans(vars, "block", "--workspace", ws.String(), "--json", blk.FileID.String())
			var got map[string]any
			if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil || got["state"] != "blocked" || got["changed"] != (i == 0) ||
				!strings.Contains(stderr, "action=block") || !strings.Contains(stderr, "file_id="+blk.FileID.String()) {
				t.Fatalf("block #%d: exit %d\n%s%s", i+1, code, stdout, stderr)
			}
		}
		if listed(blk.FileID) || !objectGone(key(blk)) {
			t.Fatal("blocked: listed, or its object still there")
		}
		if code, _, stderr := scans(vars, "release", "--workspace", ws.String(), blk.FileID.String()); code != exitFailed || !strings.Contains(stderr, "is blocked, not held") {
			t.Fatalf("release after block: exit %d, %q", code, stderr)
		}
	})
	if code, _, _ := scans(vars, "release", "--workspace", ws.String(), "not-a-uuid"); code != exitUsage {
		t.Fatalf("a FILE that is not a UUID: exit %d, want %d", code, exitUsage)
	}
}
