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

	"github.com/pendinguploads/pendinguploads/internal/httpapi"
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
// deletes it, and no object that has a row.
func TestTimedOutUploadLeavesNoObject(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"INLINE_MAX_BYTES": "1024"}})
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
	if d := time.Since(start); d > httpapi.RequestDeadline+5*time.Second {
		t.Errorf("answered after %v", d)
	}
	// Postgres's statement_timeout and the request's deadline are both
	// 10 s: when the server cancelled the statement first, the outcome was
	// certain and the object went before the answer; otherwise it is
	// there, and marked.
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
	// Past statement_timeout (10 s from the statement's start): the batch
	// was cancelled, and releasing the lock lets nothing commit.
	time.Sleep(time.Until(start.Add(12 * time.Second)))
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
