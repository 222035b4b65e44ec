package pendinguploads_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// TestPlansUsePartialIndexes shows, with EXPLAIN on a table large enough
// for the planner to care, that the poll and both sweep passes read their
// partial indexes rather than the table.
func TestPlansUsePartialIndexes(t *testing.T) {
	_, pool := open(t)
	ctx := context.Background()
	mustExec(t, pool, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, acked_at, created_at)
		SELECT (ARRAY[gen_random_uuid(), '00000000-0000-0000-0000-000000000001'::uuid])[1 + (g % 50 = 0)::int],
		       'x', 1, 'f', CASE WHEN g % 3 = 0 THEN now() - (g || ' seconds')::interval END,
		       now() - (g || ' seconds')::interval
		FROM generate_series(1, 20000) g`)
	mustExec(t, pool, `ANALYZE pending_uploads`)
	ws := uuid.MustParse("00000000-0000-0000-0000-000000000001")
	sweepArgs := []any{int64(3600_000_000), 1000, time.Now().Add(-3 * time.Hour), uuid.Nil}
	cases := []struct {
		name, index, sql string
		args             []any
	}{
		{"ListFirstPage", "idx_pending_uploads_workspace_page",
			`SELECT file_id FROM pending_uploads WHERE workspace_id = $1 AND acked_at IS NULL AND expires_at > now() ORDER BY created_at, file_id LIMIT 51`,
			[]any{ws}},
		{"ListAfterCursor", "idx_pending_uploads_workspace_page",
			`SELECT file_id FROM pending_uploads WHERE workspace_id = $1 AND acked_at IS NULL AND expires_at > now() AND (created_at, file_id) > (now() - interval '1 hour', $2::uuid) ORDER BY created_at, file_id LIMIT 51`,
			[]any{ws, uuid.Nil}},
		// The sweep's batches, as sent: each a range scan of its index
		// that starts at the cursor (Index Cond key >= $3), so a batch
		// never reads what the batches before it deleted.
		{"SweepAckedBatch", "idx_pending_uploads_acked", pendinguploads.SweepBatchSQL("acked", false), sweepArgs},
		{"SweepAckedBatchBucket", "idx_pending_uploads_acked", pendinguploads.SweepBatchSQL("acked", true), sweepArgs},
		{"SweepExpiredBatch", "idx_pending_uploads_expires", pendinguploads.SweepBatchSQL("expired", false), sweepArgs},
		{"SweepExpiredBatchBucket", "idx_pending_uploads_expires", pendinguploads.SweepBatchSQL("expired", true), sweepArgs},
	}
	// With a bucket, each batch's rows go by primary key alone: a bitmap
	// of the pass's index would read the whole backlog in every batch.
	for _, kind := range []string{"acked", "expired"} {
		cases = append(cases, struct {
			name, index, sql string
			args             []any
		}{"SweepDeleteByID/" + kind, "pending_uploads_pkey", pendinguploads.SweepDeleteByIDSQL(kind), []any{int64(0), []uuid.UUID{uuid.New(), uuid.New()}}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows, err := pool.Query(ctx, "EXPLAIN "+c.sql, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, line)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			p := strings.Join(plan, "\n")
			if !strings.Contains(p, c.index) || strings.Contains(p, "Seq Scan on pending_uploads") {
				t.Fatalf("plan does not use %s:\n%s", c.index, p)
			}
			if strings.HasPrefix(c.name, "SweepDeleteByID") && regexp.MustCompile(`idx_pending_uploads_(acked|expires)`).MatchString(p) {
				t.Fatalf("the delete reads the pass's index:\n%s", p)
			}
			if strings.HasPrefix(c.name, "SweepBatch") || strings.HasPrefix(c.name, "SweepAcked") || strings.HasPrefix(c.name, "SweepExpired") {
				if !regexp.MustCompile(`Index Cond: .*_at >= `).MatchString(p) {
					t.Fatalf("the batch's index scan does not start at its cursor:\n%s", p)
				}
			}
		})
	}
}

// planNode is a node of EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)'s plan.
type planNode struct {
	NodeType        string     `json:"Node Type"`
	IndexName       string     `json:"Index Name"`
	Relation        string     `json:"Relation Name"`
	ActualRows      float64    `json:"Actual Rows"`
	Loops           float64    `json:"Actual Loops"`
	RowsRemoved     float64    `json:"Rows Removed by Filter"`
	RowsRemovedBulk float64    `json:"Rows Removed by Index Recheck"`
	SharedHit       float64    `json:"Shared Hit Blocks"`
	SharedRead      float64    `json:"Shared Read Blocks"`
	Plans           []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// batchCapture records the statements (as sent: $n placeholders) and
// arguments a pool sends, in batches or alone.
type batchCapture struct {
	mu    sync.Mutex
	stmts []capturedStatement
}

type capturedStatement struct {
	sql  string
	args []any
}

func (c *batchCapture) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, "EXPLAIN ") { // explainAnalyze's own, on the same pool
		return ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stmts = append(c.stmts, capturedStatement{d.SQL, d.Args})
	return ctx
}
func (c *batchCapture) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *batchCapture) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *batchCapture) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stmts = append(c.stmts, capturedStatement{d.SQL, d.Args})
}
func (c *batchCapture) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// last is the last statement sent that contains marker.
func (c *batchCapture) last(t *testing.T, marker string) capturedStatement {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.stmts) - 1; i >= 0; i-- {
		if strings.Contains(c.stmts[i].sql, marker) {
			return c.stmts[i]
		}
	}
	t.Fatalf("no statement sent with %q", marker)
	return capturedStatement{}
}

// explainAnalyze runs st under EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON),
// in a transaction it rolls back (st may write), and returns its plan,
// and the plan's text for failure messages.
func explainAnalyze(t *testing.T, pool *pgxpool.Pool, st capturedStatement) (planNode, string) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var out []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) "+st.sql, st.args...).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN's output: %v\n%s", err, out)
	}
	return plans[0].Plan, string(out)
}

// capturingPool is a pool on a fresh test database whose statements
// (batches included) are recorded, for explainAnalyze.
func capturingPool(t *testing.T) (*pgxpool.Pool, *batchCapture) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.MustURL(t))
	if err != nil {
		t.Fatal(err)
	}
	capture := &batchCapture{}
	cfg.ConnConfig.Tracer = capture
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, capture
}

// TestExpiredRowsAreNotRead: rows past expires_at that the sweep has not
// reached cost the list and the quota's count no table read. The list
// passes over them in an Index Only Scan of
// idx_pending_uploads_workspace_page, and reads from the table only the
// rows it returns; the count reads the workspace's running total and
// subtracts them, counted from the range expires_at <= now() of
// idx_pending_uploads_workspace_pending, and reads no live row. The
// statements List and Stage send are captured and explained with their
// arguments; no timing is asserted, only where rows were read and dropped.
func TestExpiredRowsAreNotRead(t *testing.T) {
	pool, capture := capturingPool(t)
	settings := apptest.StoreSettings()
	settings.MaxPendingFiles = 10
	s := pendinguploads.New(pool, nil, settings)
	ctx := context.Background()
	ws := uuid.New()
	// 2,000 expired rows of ws staged first, 10 live ones after, and
	// 10,000 rows of other workspaces.
	mustExec(t, pool, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, created_at, expires_at)
		SELECT $1, 'x', 1, 'expired', now() - interval '2 days' + g * interval '1 ms', now() - interval '1 day' + g * interval '1 ms'
		FROM generate_series(1, 2000) g`, ws)
	mustExec(t, pool, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, created_at, expires_at)
		SELECT $1, 'x', 2, 'live', now() - interval '1 hour' + g * interval '1 ms', now() + interval '1 day'
		FROM generate_series(1, 10) g`, ws)
	mustExec(t, pool, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, created_at, expires_at)
		SELECT gen_random_uuid(), 'x', 1, 'other', now() - interval '1 hour', now() + interval '1 day'
		FROM generate_series(1, 10000) g`)
	mustExec(t, pool, `VACUUM ANALYZE pending_uploads`)
	// Rows written by hand are in no running total: recounted, as
	// pendingctl recount does.
	if _, _, err := s.Recount(ctx, ws); err != nil {
		t.Fatal(err)
	}

	check := func(t *testing.T, st capturedStatement, index string, scan func(planNode) bool) {
		t.Helper()
		plan, text := explainAnalyze(t, pool, st)
		byIndex := false
		plan.walk(func(n planNode) {
			switch n.NodeType {
			case "Index Only Scan", "Bitmap Index Scan", "Index Scan":
				// The planner may take the index's range through a
				// bitmap (its row estimate for expires_at > now() is
				// coarse): the table is then read only for the rows in
				// the range, and the check below holds it to that.
				if regexp.MustCompile(`^(`+index+`)$`).MatchString(n.IndexName) && scan(n) {
					byIndex = true
				}
			}
			switch n.NodeType {
			case "Seq Scan", "Index Scan", "Bitmap Heap Scan":
				// A table read: only of rows kept.
				if n.RowsRemoved > 0 || n.RowsRemovedBulk > 0 {
					t.Errorf("%s read %v rows from the table it then dropped", n.NodeType, n.RowsRemoved+n.RowsRemovedBulk)
				}
			}
		})
		if !byIndex {
			t.Errorf("no scan of %s as expected", index)
		}
		if t.Failed() {
			t.Logf("plan:\n%s", text)
		}
	}
	t.Run("List", func(t *testing.T) {
		recs, next, err := s.List(ctx, auth.AdminIdentity(), ws, 5, nil)
		if err != nil || len(recs) != 5 || next == nil {
			t.Fatalf("first page: %d rows, next %v, %v", len(recs), next, err)
		}
		check(t, capture.last(t, "CROSS JOIN LATERAL"), "idx_pending_uploads_workspace_page", func(planNode) bool { return true })
		// And the index itself: the 2,000 expired rows are outside the
		// range (created before now() less the workspace's max_ttl), not
		// entries read and dropped.
		plan, text := explainAnalyze(t, pool, capture.last(t, "CROSS JOIN LATERAL"))
		plan.walk(func(n planNode) {
			if n.IndexName == "idx_pending_uploads_workspace_page" && n.RowsRemoved > 0 {
				t.Errorf("%s of %s read %v entries it then dropped (the expired rows):\n%s", n.NodeType, n.IndexName, n.RowsRemoved, text)
			}
		})
		if recs, _, err = s.List(ctx, auth.AdminIdentity(), ws, 5, next); err != nil || len(recs) != 5 {
			t.Fatalf("second page: %d rows, %v", len(recs), err)
		}
		check(t, capture.last(t, "CROSS JOIN LATERAL"), "idx_pending_uploads_workspace_page", func(planNode) bool { return true })
	})
	t.Run("QuotaCount", func(t *testing.T) {
		// The workspace is full (10 files): the refusal, the statement
		// that stores having counted and stored nothing.
		_, err := stageOne(ctx, s, ws, []byte("y"), "refused", "")
		if qe, ok := errors.AsType[*pendinguploads.QuotaError](err); !ok || qe.Pending != 10 {
			t.Fatalf("stage into a full workspace: got %v, want a QuotaError with 10 pending", err)
		}
		// The count is the workspace's running total less its expired
		// rows the sweep has not reached: its scan finds the 2,000
		// expired rows, and none of the live ones (however many wait),
		// from the workspace's index or the sweep's (idx_pending_uploads_expires:
		// the planner's choice when few rows are expired at all).
		check(t, capture.last(t, "INSERT INTO pending_uploads"), "idx_pending_uploads_workspace_pending|idx_pending_uploads_expires",
			func(n planNode) bool { return n.ActualRows == 2000 })
	})
	t.Run("QuotaCountBelowTheQuota", func(t *testing.T) {
		// Far below its quota, the workspace's total (its 2,000 expired
		// rows included) already fits what the call adds: no expired row
		// is read (totalFits).
		roomy := settings
		roomy.MaxPendingFiles = 100_000
		s := pendinguploads.New(pool, nil, roomy)
		rec, err := stageOne(ctx, s, ws, []byte("z"), "fits", "")
		if err != nil {
			t.Fatal(err)
		}
		// Explained as sent, its file_id free again.
		mustExec(t, pool, `DELETE FROM pending_uploads WHERE file_id = $1`, rec.FileID)
		plan, text := explainAnalyze(t, pool, capture.last(t, "INSERT INTO pending_uploads"))
		plan.walk(func(n planNode) {
			if regexp.MustCompile(`^(idx_pending_uploads_workspace_pending|idx_pending_uploads_expires)$`).MatchString(n.IndexName) && n.ActualRows > 0 {
				t.Errorf("%s of %s read %v rows below the quota (the expired ones):\n%s", n.NodeType, n.IndexName, n.ActualRows, text)
			}
		})
	})
}

// TestOverduePassReadsWhatItReturns: the overdue scans' pass
// (DecideOverdue, on the sweep's schedule) reads, of scanned_uploads,
// only the pending rows past SCAN_TIMEOUT that it returns, through
// idx_scanned_uploads_overdue: not the held rows beside them (they wait
// there until they expire), nor any decided one. Its statement is
// captured as sent and explained with an earlier cut-off; no timing is
// asserted, only where rows were read and dropped.
func TestOverduePassReadsWhatItReturns(t *testing.T) {
	pool, capture := capturingPool(t)
	s := pendinguploads.New(pool, nil, apptest.StoreSettings())
	// 10,000 scanned files of an hour ago: 100 pending, 900 held, the
	// rest clean.
	mustExec(t, pool, `INSERT INTO scanned_uploads (file_id, workspace_id, s3_key, size_bytes, sha256, filename, created_at, expires_at, state)
		SELECT gen_random_uuid(), gen_random_uuid(), 'objects/x/' || g, 10, '\x00', 'f', now() - interval '1 hour' + g * interval '1 ms', now() + interval '1 day',
		       CASE WHEN g % 100 = 0 THEN 'pending' WHEN g % 10 = 0 THEN 'held' ELSE 'clean' END
		FROM generate_series(1, 10000) g`)
	mustExec(t, pool, `VACUUM ANALYZE scanned_uploads`)
	// Nothing is overdue at a day: the statement is sent, nothing decided.
	if out, err := s.DecideOverdue(context.Background(), 24*time.Hour, pendinguploads.Hold); err != nil || len(out) != 0 {
		t.Fatalf("DecideOverdue at a day: %v, %v", out, err)
	}
	st := capture.last(t, "FROM scanned_uploads")
	named, ok := st.args[0].(pgx.NamedArgs)
	if len(st.args) != 1 || !ok {
		t.Fatalf("DecideOverdue's statement sent %v, want its named arguments", st.args)
	}
	earlier := pgx.NamedArgs{}
	for k, v := range named {
		earlier[k] = v
	}
	earlier["timeout_micros"] = time.Minute.Microseconds() // a minute: all 100 pending rows are overdue
	plan, text := explainAnalyze(t, pool, capturedStatement{st.sql, []any{earlier}})
	returned, byIndex := 0.0, false
	plan.walk(func(n planNode) {
		if n.IndexName == "idx_scanned_uploads_overdue" {
			byIndex = true
		}
		if n.Relation == "scanned_uploads" {
			returned = n.ActualRows
			if n.RowsRemoved > 0 || n.RowsRemovedBulk > 0 {
				t.Errorf("%s read %v rows of scanned_uploads it then dropped", n.NodeType, n.RowsRemoved+n.RowsRemovedBulk)
			}
		}
	})
	if !byIndex || returned != 100 {
		t.Errorf("no scan of idx_scanned_uploads_overdue, or %v rows read, want the 100 pending", returned)
	}
	if t.Failed() {
		t.Logf("plan:\n%s", text)
	}
}
