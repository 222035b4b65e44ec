package pendinguploads_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// TestBacklog measures a known set of rows, aged in SQL: files waiting in
// two workspaces count (the oldest staged 3 hours ago), acked and expired
// ones do not.
func TestBacklog(t *testing.T) {
	s, pool := open(t)
	ctx := context.Background()

	got, err := s.Backlog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != (pendinguploads.Backlog{}) {
		t.Errorf("empty table: got %+v, want zeros", got)
	}

	a, b := uuid.New(), uuid.New()
	rows := []struct {
		ws   uuid.UUID
		name string
		set  string // UPDATE ... SET, or "" to leave it fresh
	}{
		{a, "fresh", ``},
		{a, "old", `created_at = now() - interval '3 hours', expires_at = now() + interval '21 hours'`},
		{b, "fetched", `created_at = now() - interval '1 hour', fetched_at = now()`},
		{a, "acked", `created_at = now() - interval '5 hours', acked_at = now()`},
		{b, "expired", `created_at = now() - interval '30 hours', expires_at = now() - interval '6 hours'`},
	}
	var wantBytes int64
	for _, r := range rows {
		rec := mustStage(t, s, r.ws, r.name)
		if r.set != "" {
			mustExec(t, pool, `UPDATE pending_uploads SET `+r.set+` WHERE file_id = $1`, rec.FileID)
		}
		if r.name == "fresh" || r.name == "old" || r.name == "fetched" {
			wantBytes += rec.SizeBytes
		}
	}

	got, err = s.Backlog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Files != 3 || got.Bytes != wantBytes || got.Truncated {
		t.Errorf("got %+v, want 3 files, %d bytes, not truncated", got, wantBytes)
	}
	// The rows were aged on the database's clock a moment ago.
	if lo, hi := 3*time.Hour, 3*time.Hour+time.Minute; got.OldestAge < lo || got.OldestAge > hi {
		t.Errorf("OldestAge: got %v, want within [%v, %v]", got.OldestAge, lo, hi)
	}

	// Once the old file is acked, the oldest waiting is the fetched one.
	mustExec(t, pool, `UPDATE pending_uploads SET acked_at = now() WHERE filename = 'old'`)
	got, err = s.Backlog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := time.Hour, time.Hour+time.Minute; got.Files != 2 || got.OldestAge < lo || got.OldestAge > hi {
		t.Errorf("after ack: got %+v, want 2 files, oldest within [%v, %v]", got, lo, hi)
	}
}

// TestBacklogBounded: 10,500 files waiting are read no further than
// BacklogScanLimit (10,000): reported as that many, truncated, with the
// oldest file's age still right (it is the first row the scan reads).
func TestBacklogBounded(t *testing.T) {
	s, pool := open(t)
	const waiting = 10_500
	mustExec(t, pool, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, created_at, expires_at)
		SELECT gen_random_uuid(), 'x', 1, 'f', now() - (g || ' seconds')::interval, now() + interval '1 day' - (g || ' seconds')::interval
		FROM generate_series(1, $1::int) g`, waiting)
	got, err := s.Backlog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(10_000); got.Files != want || got.Bytes != want || !got.Truncated {
		t.Errorf("got %+v, want %d files and bytes, truncated", got, want)
	}
	if lo, hi := waiting*time.Second, (waiting+60)*time.Second; got.OldestAge < lo || got.OldestAge > hi {
		t.Errorf("OldestAge: got %v, want within [%v, %v]", got.OldestAge, lo, hi)
	}
}
