package pendinguploads_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/limits"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// assertTotalsRecount fails t unless every workspace's running total
// (pending_upload_totals) equals a recount of its rows: unacked, not yet
// swept (a workspace without a total counts 0).
func assertTotalsRecount(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT workspace_id, coalesce(t.files, 0), coalesce(c.files, 0), coalesce(t.bytes, 0), coalesce(c.bytes, 0)
		FROM pending_upload_totals t FULL JOIN (
		    SELECT workspace_id, count(*) AS files, sum(size_bytes)::bigint AS bytes
		    FROM pending_uploads WHERE acked_at IS NULL GROUP BY workspace_id) c USING (workspace_id)
		WHERE coalesce(t.files, 0) <> coalesce(c.files, 0) OR coalesce(t.bytes, 0) <> coalesce(c.bytes, 0)`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var ws uuid.UUID
		var files, countedFiles, bytes, countedBytes int64
		if err := rows.Scan(&ws, &files, &countedFiles, &bytes, &countedBytes); err != nil {
			t.Fatal(err)
		}
		t.Errorf("workspace %s: total %d files, %d bytes; recount %d files, %d bytes", ws, files, bytes, countedFiles, countedBytes)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// totalOf is ws's running total, zero without one.
func totalOf(t *testing.T, pool *pgxpool.Pool, ws uuid.UUID) pendinguploads.Total {
	t.Helper()
	var tot pendinguploads.Total
	err := pool.QueryRow(context.Background(), `SELECT coalesce(sum(files), 0)::bigint, coalesce(sum(bytes), 0)::bigint
		FROM pending_upload_totals WHERE workspace_id = $1`, ws).Scan(&tot.Files, &tot.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return tot
}

// openTotals returns a store over a fresh database with a quota of
// maxFiles files, its pool, and with bucket a fresh bucket (files over 4
// bytes go there).
func openTotals(t *testing.T, maxFiles int64, bucket bool) (*pendinguploads.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.MustOpen(t)
	settings := apptest.StoreSettings()
	settings.MaxPendingFiles = maxFiles
	settings.MaxPendingBytes = 1 << 30
	var blobs pendinguploads.Bucket
	if bucket {
		client, name := s3test.NewBucket(t, s3test.MustStart(t))
		b := s3blobs.NewFromClient(client, name)
		b.MaxSize = limits.MaxFileBytes
		blobs = b
	}
	s := pendinguploads.New(pool, blobs, settings)
	if bucket {
		s.InlineMaxBytes = 4
	}
	return s, pool
}

func files(names ...string) []pendinguploads.File {
	out := make([]pendinguploads.File, len(names))
	for i, n := range names {
		out[i] = pendinguploads.File{Content: []byte("content of " + n), Filename: n}
	}
	return out
}

// TestTotalEqualsRecount: after every path that stages, acks or sweeps,
// and after each refusal, each workspace's running total is what a
// recount of its rows finds.
func TestTotalEqualsRecount(t *testing.T) {
	ctx := context.Background()
	admin := auth.AdminIdentity()

	t.Run("StageInline", func(t *testing.T) {
		s, pool := openTotals(t, 100, false)
		ws := uuid.New()
		recs, err := s.Stage(ctx, admin, ws, files("a", "bb", "ccc"))
		if err != nil || len(recs) != 3 {
			t.Fatalf("stage: %v", err)
		}
		assertTotalsRecount(t, pool)
		if got := totalOf(t, pool, ws); got.Files != 3 {
			t.Fatalf("total %+v, want 3 files", got)
		}
	})

	t.Run("StageBucketAndCommit", func(t *testing.T) {
		s, pool := openTotals(t, 100, true)
		ws := uuid.New()
		recs, err := s.Stage(ctx, admin, ws, files("in the bucket", "x"))
		if err != nil || recs[0].Key() == "" {
			t.Fatalf("stage: %v (%+v)", err, recs)
		}
		assertTotalsRecount(t, pool)
		data := bytes.Repeat([]byte("p"), 1000)
		puts, err := s.Presign(ctx, admin, ws, []pendinguploads.Declared{{Filename: "p.bin", Size: int64(len(data))}})
		if err != nil {
			t.Fatal(err)
		}
		putPresigned(t, puts[0], data)
		if _, _, err := s.Commit(ctx, admin, ws, []uuid.UUID{puts[0].UploadID}); err != nil {
			t.Fatal(err)
		}
		assertTotalsRecount(t, pool)
		// A retried commit replays and stores nothing: counted once.
		if _, replayed, err := s.Commit(ctx, admin, ws, []uuid.UUID{puts[0].UploadID}); err != nil || !replayed {
			t.Fatalf("retry: replayed %v, %v", replayed, err)
		}
		assertTotalsRecount(t, pool)
		if got := totalOf(t, pool, ws); got.Files != 3 || got.Bytes != recs[0].SizeBytes+recs[1].SizeBytes+1000 {
			t.Fatalf("total %+v, want 3 files", got)
		}
	})

	t.Run("AckTwiceThenSweep", func(t *testing.T) {
		s, pool := openTotals(t, 100, false)
		ws := uuid.New()
		recs, err := s.Stage(ctx, admin, ws, files("a", "b"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []pendinguploads.AckResult{pendinguploads.Acked, pendinguploads.AlreadyAcked} {
			got, err := s.Ack(ctx, admin, ws, recs[0].FileID)
			if err != nil || got != want {
				t.Fatalf("ack: %v, %v; want %v", got, err, want)
			}
			assertTotalsRecount(t, pool)
		}
		if got := totalOf(t, pool, ws); got.Files != 1 || got.Bytes != recs[1].SizeBytes {
			t.Fatalf("total after acks %+v, want the one unacked file", got)
		}
		// The acked row swept: it had left the total at its ack.
		if res, err := s.Sweep(ctx, 0); err != nil || res.Acked != 1 {
			t.Fatalf("sweep: %+v, %v", res, err)
		}
		assertTotalsRecount(t, pool)
	})

	t.Run("ExpiryThenSweep", func(t *testing.T) {
		for _, bucket := range []bool{false, true} {
			t.Run(fmt.Sprintf("bucket=%v", bucket), func(t *testing.T) {
				s, pool := openTotals(t, 2, bucket)
				ws, other := uuid.New(), uuid.New()
				if _, err := s.Stage(ctx, admin, ws, files("expires", "soon")); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Stage(ctx, admin, other, files("stays")); err != nil {
					t.Fatal(err)
				}
				// Full; then its files expire: counted in the total until
				// swept, but no longer pending for the quota.
				if _, err := s.Stage(ctx, admin, ws, files("refused")); !isQuota(err) {
					t.Fatalf("stage into a full workspace: %v", err)
				}
				mustExec(t, pool, `UPDATE pending_uploads SET expires_at = now() - interval '1 second' WHERE workspace_id = $1`, ws)
				assertTotalsRecount(t, pool)
				if _, err := s.Stage(ctx, admin, ws, files("fits", "again")); err != nil {
					t.Fatalf("stage after expiry: %v", err)
				}
				res, err := s.Sweep(ctx, 0)
				if err != nil || res.Expired != 2 {
					t.Fatalf("sweep: %+v, %v", res, err)
				}
				assertTotalsRecount(t, pool)
				if got := totalOf(t, pool, ws); got.Files != 2 {
					t.Fatalf("total after the sweep %+v, want 2 files", got)
				}
			})
		}
	})

	t.Run("Refusals", func(t *testing.T) {
		s, pool := openTotals(t, 2, false)
		ws := uuid.New()
		if _, err := s.Stage(ctx, admin, ws, files("a", "b")); err != nil {
			t.Fatal(err)
		}
		_, err := s.Stage(ctx, admin, ws, files("c"))
		if qe, ok := errors.AsType[*pendinguploads.QuotaError](err); !ok || qe.Pending != 2 {
			t.Fatalf("stage into a full workspace: %v, want a QuotaError with 2 pending", err)
		}
		assertTotalsRecount(t, pool)
		s.RefuseUnknownWorkspaces = true
		unknown := uuid.New()
		if _, err := s.Stage(ctx, admin, unknown, files("lost")); !errors.Is(err, pendinguploads.ErrUnknownWorkspace) {
			t.Fatalf("stage into an unknown workspace: %v", err)
		}
		assertTotalsRecount(t, pool)
		if n := countWhere(t, pool, `pending_upload_totals WHERE workspace_id = $1`, unknown); n != 0 {
			t.Fatalf("an unknown workspace got a total")
		}
	})

	t.Run("FailsAfterTheTotal", func(t *testing.T) {
		// The transaction fails at its COMMIT, after the statement that
		// stored the rows and moved the total: neither stays.
		s, pool := openTotals(t, 100, false)
		ws := uuid.New()
		if _, err := s.Stage(ctx, admin, ws, files("before")); err != nil {
			t.Fatal(err)
		}
		mustExec(t, pool, `CREATE FUNCTION fail_total() RETURNS trigger LANGUAGE plpgsql AS
			$$BEGIN IF NEW.files > 1 THEN RAISE EXCEPTION 'injected after the total'; END IF; RETURN NULL; END$$`)
		mustExec(t, pool, `CREATE CONSTRAINT TRIGGER fail_total AFTER INSERT OR UPDATE ON pending_upload_totals
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_total()`)
		if _, err := s.Stage(ctx, admin, ws, files("x", "y")); err == nil {
			t.Fatal("stage with a failing commit succeeded")
		}
		assertTotalsRecount(t, pool)
		if got := totalOf(t, pool, ws); got.Files != 1 {
			t.Fatalf("total %+v, want the 1 file before", got)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		s, pool := openTotals(t, 30, false)
		ws := uuid.New()
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Go(func() {
				for i := range 8 {
					recs, err := s.Stage(ctx, admin, ws, files(fmt.Sprintf("g%d-%d", g, i)))
					if err != nil {
						continue // the quota, or a busy turn
					}
					if i%2 == 0 {
						_, _ = s.Ack(ctx, admin, ws, recs[0].FileID)
						_, _ = s.Ack(ctx, admin, ws, recs[0].FileID)
					}
				}
			})
		}
		wg.Wait()
		assertTotalsRecount(t, pool)
	})

	t.Run("RecountRepairsRowsWrittenElsewhere", func(t *testing.T) {
		s, pool := openTotals(t, 100, false)
		ws := uuid.New()
		if _, err := s.Stage(ctx, admin, ws, files("ours")); err != nil {
			t.Fatal(err)
		}
		// The platform's own code writes a row, and acks one of ours.
		mustExec(t, pool, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename) VALUES ($1, 'abc', 3, 'theirs')`, ws)
		mustExec(t, pool, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename) VALUES ($1, 'abc', 3, 'theirs')`, uuid.New())
		res, err := s.RecountAll(ctx)
		if err != nil || res.Workspaces != 2 || res.Repaired != 2 || res.Unfinished {
			t.Fatalf("recount: %+v, %v", res, err)
		}
		assertTotalsRecount(t, pool)
		if res, err := s.RecountAll(ctx); err != nil || res.Repaired != 0 {
			t.Fatalf("second recount: %+v, %v", res, err)
		}
	})
}

func isQuota(err error) bool {
	_, ok := errors.AsType[*pendinguploads.QuotaError](err)
	return ok
}

func countWhere(t *testing.T, pool *pgxpool.Pool, from string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+from, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// scannedRows is how many rows of pending_uploads the plan's scans
// returned, every loop.
func (n planNode) scannedRows() float64 {
	rows := 0.0
	if n.Relation == "pending_uploads" && n.NodeType != "ModifyTable" {
		rows += n.ActualRows * max(n.Loops, 1)
	}
	for _, c := range n.Plans {
		rows += c.scannedRows()
	}
	return rows
}

// TestQuotaCostIsFlat: the statement that stores reads the same rows of
// pending_uploads, and about the same buffers, whether its workspace has
// 10 files pending or 2,000, for a file stored and for one the quota
// refuses: the quota reads the workspace's running total, not its rows.
// Counts of rows and buffers from EXPLAIN (ANALYZE, BUFFERS), never times.
func TestQuotaCostIsFlat(t *testing.T) {
	pool, capture := capturingPool(t)
	settings := apptest.StoreSettings()
	settings.MaxPendingFiles = 10_000
	settings.MaxPendingBytes = 100_000
	s := pendinguploads.New(pool, nil, settings)
	ctx := context.Background()
	small, large := uuid.New(), uuid.New()
	for ws, n := range map[uuid.UUID]int{small: 10, large: 2000} {
		mustExec(t, pool, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, created_at, expires_at)
			SELECT $1, 'x', 1, 'pending', now() - interval '1 hour' + g * interval '1 ms', now() + interval '1 day' + g * interval '1 ms'
			FROM generate_series(1, $2::int) g`, ws, n)
	}
	mustExec(t, pool, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, created_at, expires_at)
		SELECT gen_random_uuid(), 'x', 1, 'other', now() - interval '1 hour', now() + interval '1 day'
		FROM generate_series(1, 5000) g`)
	if _, err := s.RecountAll(ctx); err != nil {
		t.Fatal(err)
	}
	mustExec(t, pool, `VACUUM ANALYZE pending_uploads`)
	mustExec(t, pool, `VACUUM ANALYZE pending_upload_totals`)

	measure := func(t *testing.T, ws uuid.UUID, size int, refused bool) (planNode, string) {
		t.Helper()
		rec, err := stageOne(ctx, s, ws, bytes.Repeat([]byte("y"), size), "f", "")
		if isQuota(err) != refused || (!refused && err != nil) {
			t.Fatalf("stage of %d bytes: %v, want refused %v", size, err, refused)
		}
		st := capture.last(t, "INSERT INTO pending_uploads")
		// Explained again as a new file (its first run stored this one).
		st.args = append([]any{}, st.args...)
		for i, a := range st.args {
			if a == any(rec.FileID.String()) && !refused {
				st.args[i] = uuid.NewString()
			}
		}
		return explainAnalyze(t, pool, st)
	}
	for _, c := range []struct {
		name    string
		size    int
		refused bool
	}{{"Stored", 1, false}, {"Refused", 99_995, true}} {
		t.Run(c.name, func(t *testing.T) {
			p10, text10 := measure(t, small, c.size, c.refused)
			p2k, text2k := measure(t, large, c.size, c.refused)
			rows10, rows2k := p10.scannedRows(), p2k.scannedRows()
			buf10, buf2k := p10.SharedHit+p10.SharedRead, p2k.SharedHit+p2k.SharedRead
			t.Logf("rows of pending_uploads read: %v at 10 pending, %v at 2,000; buffers %v, %v", rows10, rows2k, buf10, buf2k)
			// The index of 2,000 more rows may be a level deeper: a
			// buffer or two a descent, never one a row.
			if rows2k != rows10 || buf2k > buf10+4 {
				t.Errorf("the quota's cost grows with what waits:\n10 pending:\n%s\n2,000 pending:\n%s", text10, text2k)
			}
		})
	}
}

// TestListAfterTheTTLWasLowered: the list's range starts at now() less the
// workspace's longest time to live (its total's max_ttl), so a row staged
// under a longer TTL than today's, still live, is listed: max_ttl only
// grows as rows are staged, and a recount sets it from the rows.
func TestListAfterTheTTLWasLowered(t *testing.T) {
	ctx := context.Background()
	admin := auth.AdminIdentity()
	long, pool := openTotals(t, 100, false)
	long.TTL = 48 * time.Hour
	ws := uuid.New()
	old, err := long.Stage(ctx, admin, ws, files("staged-under-48h"))
	if err != nil {
		t.Fatal(err)
	}
	// 30 hours on: created then, live for 18 hours more.
	mustExec(t, pool, `UPDATE pending_uploads SET created_at = created_at - interval '30 hours',
		expires_at = expires_at - interval '30 hours' WHERE file_id = $1`, old[0].FileID)
	short := pendinguploads.New(pool, nil, long.Settings)
	short.TTL = time.Hour
	if _, err := short.Stage(ctx, admin, ws, files("staged-under-1h")); err != nil {
		t.Fatal(err)
	}
	listed := func() []string {
		t.Helper()
		recs, _, err := short.List(ctx, admin, ws, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range recs {
			names = append(names, r.Filename)
		}
		return names
	}
	if got := listed(); len(got) != 2 || got[0] != "staged-under-48h" {
		t.Fatalf("listed %v after the TTL was lowered, want the 48 h file and the 1 h one", got)
	}
	if _, _, err := short.Recount(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if got := listed(); len(got) != 2 {
		t.Fatalf("listed %v after a recount, want both files", got)
	}
}
