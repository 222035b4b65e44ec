package pendinguploads_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// ageRows sets up, in SQL, rows on each side of the boundaries:
// acked 2h ago, acked 30m ago, acked 2h ago and past expires_at, unacked
// and expired, unacked and live.
func ageRows(t *testing.T) (*pendinguploads.Store, func() map[string]bool) {
	t.Helper()
	s, pool := open(t)
	ws := uuid.New()
	names := map[string]string{
		"acked2h":         `acked_at = now() - interval '2 hours'`,
		"acked30m":        `acked_at = now() - interval '30 minutes'`,
		"acked2hExpired":  `acked_at = now() - interval '2 hours', expires_at = now() - interval '1 hour'`,
		"acked30mExpired": `acked_at = now() - interval '30 minutes', expires_at = now() - interval '1 minute'`,
		"expired":         `expires_at = now() - interval '1 second'`,
		"live":            `fetched_at = now()`,
	}
	for name, set := range names {
		rec := mustStage(t, s, ws, name)
		mustExec(t, pool, `UPDATE pending_uploads SET `+set+` WHERE file_id = $1`, rec.FileID)
	}
	left := func() map[string]bool {
		rows, err := pool.Query(context.Background(), `SELECT filename FROM pending_uploads`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]bool{}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			m[n] = true
		}
		return m
	}
	return s, left
}

func TestSweep(t *testing.T) {
	cases := []struct {
		name      string
		retention time.Duration
		want      pendinguploads.SweepResult
		left      []string
	}{
		{"DefaultRetention", time.Hour, pendinguploads.SweepResult{Acked: 2, Expired: 1}, []string{"acked30m", "acked30mExpired", "live"}},
		{"ZeroRetention", 0, pendinguploads.SweepResult{Acked: 4, Expired: 1}, []string{"live"}},
		{"NegativeClampedToZero", -time.Hour, pendinguploads.SweepResult{Acked: 4, Expired: 1}, []string{"live"}},
		{"LongRetention", 3 * time.Hour, pendinguploads.SweepResult{Acked: 0, Expired: 1}, []string{"acked2h", "acked30m", "acked2hExpired", "acked30mExpired", "live"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, left := ageRows(t)
			got, err := s.Sweep(context.Background(), c.retention)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
			l := left()
			if len(l) != len(c.left) {
				t.Fatalf("left: got %v, want %v", l, c.left)
			}
			for _, n := range c.left {
				if !l[n] {
					t.Fatalf("left: got %v, want %v", l, c.left)
				}
			}
			// A second sweep finds nothing more.
			if again, err := s.Sweep(context.Background(), c.retention); err != nil || again != (pendinguploads.SweepResult{}) {
				t.Fatalf("second sweep: got %+v, %v", again, err)
			}
		})
	}
}

// TestSweepRetentionBoundary: a row acked just inside the retention stays,
// one just outside goes.
func TestSweepRetentionBoundary(t *testing.T) {
	s, pool := open(t)
	ws := uuid.New()
	inside := mustStage(t, s, ws, "inside")
	outside := mustStage(t, s, ws, "outside")
	mustExec(t, pool, `UPDATE pending_uploads SET acked_at = now() - interval '59 minutes 50 seconds' WHERE file_id = $1`, inside.FileID)
	mustExec(t, pool, `UPDATE pending_uploads SET acked_at = now() - interval '60 minutes 10 seconds' WHERE file_id = $1`, outside.FileID)
	res, err := s.Sweep(context.Background(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if res.Acked != 1 {
		t.Fatalf("acked swept: got %d, want 1", res.Acked)
	}
	if n := countRows(t, pool, "pending_uploads"); n != 1 {
		t.Fatalf("rows left: got %d, want 1", n)
	}
}

// TestSweepBatches: a backlog larger than the batch goes in several
// bounded statements, and the counts add up.
func TestSweepBatches(t *testing.T) {
	s, pool, tr := openTraced(t)
	ctx := context.Background()
	mustExec(t, pool, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, acked_at)
		SELECT gen_random_uuid(), 'x', 1, 'f', now() - interval '2 hours' FROM generate_series(1, 250)`)
	mustExec(t, pool, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, expires_at)
		SELECT gen_random_uuid(), 'x', 1, 'f', now() - interval '1 minute' FROM generate_series(1, 120)`)
	s.SweepBatch = 100
	res, err := s.Sweep(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if res.Acked != 250 || res.Expired != 120 {
		t.Fatalf("got %+v, want 250 acked, 120 expired", res)
	}
	// 3 batches for 250 acked, 2 for 120 expired.
	if n := tr.count("DELETE FROM pending_uploads"); n != 5 {
		t.Fatalf("DELETE statements: got %d, want 5", n)
	}
	if n := countRows(t, pool, "pending_uploads"); n != 0 {
		t.Fatalf("rows left: %d", n)
	}
}
