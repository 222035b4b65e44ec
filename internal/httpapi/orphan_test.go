package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// keysUnder lists the bucket's keys under prefix.
func keysUnder(t *testing.T, srv *apptest.Server, prefix string) []string {
	t.Helper()
	out, err := s3test.NewClient(srv.S3).ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{
		Bucket: aws.String(srv.Bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

// TestTimedOutUploadLeavesNoObject: an upload whose rows wait on a lock
// held past the request's deadline answers 503 and stores no row. Its
// object, written to the bucket before the rows, cannot be deleted before
// the answer (the batch might still commit when the lock goes); it is
// marked, and the first sweep after the batch can no longer commit
// deletes it, and no object that has a row. REQUEST_TIMEOUT is 1 s, and
// the batch left waiting is cancelled as statement_timeout cancels it (10
// s after it began, a query_canceled) before the lock goes.
func TestTimedOutUploadLeavesNoObject(t *testing.T) {
	// Not parallel: REQUEST_TIMEOUT is 1 s, and the service must answer
	// within it where the test wants an answer.
	const requestTimeout = time.Second
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"INLINE_MAX_BYTES": "1024", "REQUEST_TIMEOUT": requestTimeout.String()}})
	ws := uuid.New()
	kept := stage(t, srv, ws, "kept.bin", "application/octet-stream", strings.Repeat("k", 4096))

	ctx := context.Background()
	tx, err := srv.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE pending_uploads IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	body, ctype := form(t, file("late.bin", "application/octet-stream", strings.Repeat("l", 4096)))
	res := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ctype, body)
	wantError(t, res, http.StatusServiceUnavailable, "storage unavailable, retry shortly", map[string]any{"code": "unavailable"})
	if d := time.Since(start); d > requestTimeout+5*time.Second {
		t.Errorf("answered after %v", d)
	}
	// Had Postgres cancelled the statement first (statement_timeout),
	// the outcome was certain and the object went before the answer;
	// otherwise it is there, and marked.
	objects := keysUnder(t, srv, "objects/"+ws.String()+"/")
	marks := keysUnder(t, srv, "orphans/")
	switch {
	case len(objects) == 1 && len(marks) == 0:
		t.Log("the statement was cancelled by the server first: the object was deleted before the answer")
	case len(objects) == 2 && len(marks) == 1:
	default:
		t.Fatalf("after the 503: objects %v, marks %v; want the late upload's object deleted, or kept and marked", objects, marks)
	}
	wantOrphans := len(marks)
	// The batch still waits on the lock, its client gone: cancelled (as
	// statement_timeout would), releasing the lock lets nothing commit.
	cancelLockWaiters(t, srv)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if u, a := rowCounts(t, srv, ws); u != 1 || a != 1 {
		t.Fatalf("rows: %d uploads, %d activity rows; want only the kept file's", u, a)
	}
	// A mark younger than the grace is left alone; past it, the sweep
	// deletes the object and the mark, and keeps every object with a row.
	if res, err := srv.Store.Sweep(ctx, time.Hour); err != nil || res.Orphans != 0 {
		t.Fatalf("sweep within the grace: %+v, %v; want no orphan deleted", res, err)
	}
	srv.Store.Now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	res2, err := srv.Store.Sweep(ctx, time.Hour)
	if err != nil || res2.Orphans != wantOrphans {
		t.Fatalf("sweep: %+v, %v; want %d orphans deleted", res2, err, wantOrphans)
	}
	objects = keysUnder(t, srv, "objects/"+ws.String()+"/")
	if len(objects) != 1 || !strings.HasSuffix(objects[0], kept.FileID) {
		t.Errorf("objects after one sweep: %v, want only %s", objects, kept.FileID)
	}
	if marks := keysUnder(t, srv, "orphans/"); len(marks) != 0 {
		t.Errorf("marks after the sweep: %v", marks)
	}
}

// cancelLockWaiters cancels the statements of srv's database that wait on
// a lock (pg_cancel_backend: a query_canceled, as statement_timeout's),
// and returns once none waits, or fails t after 10 s.
func cancelLockWaiters(t *testing.T, srv *apptest.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		var waiting int
		err := srv.Pool.QueryRow(ctx, `SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&waiting)
		if err != nil {
			t.Fatalf("cancel the statements waiting on a lock: %v", err)
		}
		if waiting == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
