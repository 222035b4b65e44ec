package pendinguploads_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// stageAged stages one file per name in ws and moves the activity row of
// each name in old back past the retention.
func stageAged(t *testing.T, s *pendinguploads.Store, pool *pgxpool.Pool, ws uuid.UUID, names []string, old map[string]bool) {
	t.Helper()
	for _, n := range names {
		if _, err := s.Stage(context.Background(), auth.AdminIdentity(), ws, []pendinguploads.File{{Content: []byte(n), Filename: n}}); err != nil {
			t.Fatal(err)
		}
		if old[n] {
			mustExec(t, pool, `UPDATE activity_logs SET created_at = now() - interval '31 days' WHERE request_body->>'name' = $1`, n)
		}
	}
}

func activityNames(t *testing.T, pool *pgxpool.Pool) map[string]bool {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT coalesce(request_body->>'name', summary) FROM activity_logs`)
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
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestActivityRetention: on a standalone database (the table is ours) the
// sweep deletes the activity rows this service wrote once older than
// ActivityRetention (30 days by default), across workspaces and batches,
// and keeps younger ones and rows it did not write; on the platform's
// database it deletes none, however old.
func TestActivityRetention(t *testing.T) {
	ctx := context.Background()
	old := map[string]bool{"a1": true, "a2": true, "a3": true, "b1": true, "c1": true}
	t.Run("Standalone", func(t *testing.T) {
		s, pool := open(t)
		s.SweepBatch = 2 // batches end inside a workspace and across them
		stageAged(t, s, pool, uuid.New(), []string{"a1", "a2", "a3", "a4"}, old)
		stageAged(t, s, pool, uuid.New(), []string{"b1", "b2"}, old)
		stageAged(t, s, pool, uuid.New(), []string{"c1"}, old)
		stageAged(t, s, pool, uuid.New(), []string{"d1"}, old)
		mustExec(t, pool, `INSERT INTO activity_logs (workspace_id, activity_type, method, summary, created_at)
			VALUES (gen_random_uuid(), 'other', 'not_ours', 'theirs', now() - interval '90 days')`)
		res, err := s.Sweep(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if res.Activity != len(old) || res.Unfinished {
			t.Errorf("got %+v, want %d activity rows, finished", res, len(old))
		}
		want := map[string]bool{"a4": true, "b2": true, "d1": true, "theirs": true}
		if got := activityNames(t, pool); len(got) != len(want) {
			t.Errorf("left: got %v, want %v", got, want)
		} else {
			for n := range want {
				if !got[n] {
					t.Errorf("left: got %v, want %v", got, want)
				}
			}
		}
		if again, err := s.Sweep(ctx, time.Hour); err != nil || again.Activity != 0 {
			t.Errorf("second sweep: got %+v, %v; want nothing", again, err)
		}
	})
	t.Run("PlatformsDatabase", func(t *testing.T) {
		pool, err := pgxpool.New(ctx, pgtest.MustPlatformURL(t, false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s := pendinguploads.New(pool, nil, apptest.StoreSettings())
		ws := uuid.New()
		mustExec(t, pool, `INSERT INTO workspaces (id, name) VALUES ($1, 'w')`, ws)
		stageAged(t, s, pool, ws, []string{"a1", "a2", "a4"}, old)
		res, err := s.Sweep(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if res.Activity != 0 {
			t.Errorf("got %+v, want no activity row deleted", res)
		}
		if got := activityNames(t, pool); len(got) != 3 {
			t.Errorf("left: got %v, want a1, a2, a4: the platform's table is never touched", got)
		}
	})
}
