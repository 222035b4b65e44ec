package pendinguploads_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
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
		{"SweepAcked", "idx_pending_uploads_acked",
			`SELECT file_id FROM pending_uploads WHERE acked_at IS NOT NULL AND acked_at < now() - 3600000000::bigint * interval '1 microsecond' LIMIT 1000`, nil},
		{"SweepExpired", "idx_pending_uploads_expires",
			`SELECT file_id FROM pending_uploads WHERE acked_at IS NULL AND expires_at < now() LIMIT 1000`, nil},
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
			if !strings.Contains(p, c.index) || strings.Contains(p, "Seq Scan") {
				t.Fatalf("plan does not use %s:\n%s", c.index, p)
			}
		})
	}
}

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan.
type planNode struct {
	NodeType        string     `json:"Node Type"`
	IndexName       string     `json:"Index Name"`
	ActualRows      float64    `json:"Actual Rows"`
	RowsRemoved     float64    `json:"Rows Removed by Filter"`
	RowsRemovedBulk float64    `json:"Rows Removed by Index Recheck"`
	Plans           []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// explainAnalyze runs sql under EXPLAIN (ANALYZE, FORMAT JSON) and returns
// its plan, and the plan's text for failure messages.
func explainAnalyze(t *testing.T, pool *pgxpool.Pool, sql string, args pgx.NamedArgs) (planNode, string) {
	t.Helper()
	var out []byte
	if err := pool.QueryRow(context.Background(), "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) "+sql, args).Scan(&out); err != nil {
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

// TestExpiredRowsAreNotRead: rows past expires_at that the sweep has not
// reached cost the list and the quota's count no table read. The list
// passes over them in an Index Only Scan of
// idx_pending_uploads_workspace_page, and reads from the table only the
// rows it returns; the count scans the range of
// idx_pending_uploads_workspace_pending, which leaves them out. The
// real statements (List's, the quota's) are explained; no timing is
// asserted, only where rows were read and dropped.
func TestExpiredRowsAreNotRead(t *testing.T) {
	_, pool := open(t)
	ws := uuid.MustParse("00000000-0000-0000-0000-000000000001")
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

	check := func(t *testing.T, sql string, args pgx.NamedArgs, index string, wantRows float64) {
		t.Helper()
		plan, text := explainAnalyze(t, pool, sql, args)
		if plan.ActualRows != wantRows {
			t.Errorf("rows: got %v, want %v", plan.ActualRows, wantRows)
		}
		byIndex := false
		plan.walk(func(n planNode) {
			switch n.NodeType {
			case "Index Only Scan", "Bitmap Index Scan":
				// The planner may take the index's range through a
				// bitmap (its row estimate for expires_at > now() is
				// coarse): the table is then read only for the rows in
				// the range, and the check below holds it to that.
				byIndex = byIndex || n.IndexName == index
			case "Seq Scan", "Index Scan", "Bitmap Heap Scan":
				// A table read: only of rows returned.
				if n.RowsRemoved > 0 || n.RowsRemovedBulk > 0 {
					t.Errorf("%s read %v rows from the table it then dropped", n.NodeType, n.RowsRemoved+n.RowsRemovedBulk)
				}
			}
		})
		if !byIndex {
			t.Errorf("no scan of %s", index)
		}
		if t.Failed() {
			t.Logf("plan:\n%s", text)
		}
	}
	t.Run("ListFirstPage", func(t *testing.T) {
		check(t, pendinguploads.ListSQL(false), pgx.NamedArgs{"workspace": ws, "limit": 51}, "idx_pending_uploads_workspace_page", 10)
	})
	t.Run("ListAfterCursor", func(t *testing.T) {
		check(t, pendinguploads.ListSQL(true), pgx.NamedArgs{"workspace": ws, "limit": 51,
			"after_at": time.Now().Add(-3 * 24 * time.Hour), "after_file": uuid.Nil}, "idx_pending_uploads_workspace_page", 10)
	})
	t.Run("QuotaCount", func(t *testing.T) {
		check(t, pendinguploads.PendingCount, pgx.NamedArgs{"workspace": ws}, "idx_pending_uploads_workspace_pending", 1)
		var files, bytes int64
		if err := pool.QueryRow(context.Background(), pendinguploads.PendingCount, pgx.NamedArgs{"workspace": ws}).Scan(&files, &bytes); err != nil || files != 10 || bytes != 20 {
			t.Errorf("pending: %d files, %d bytes (%v); want 10, 20", files, bytes, err)
		}
	})
}
