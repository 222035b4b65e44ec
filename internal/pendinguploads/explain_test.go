package pendinguploads_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

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
	sweepArgs := []any{int64(3600_000_000), 1000, time.Now().Add(-3 * time.Hour), uuid.Nil}
	cases := []struct {
		name, index, sql string
		args             []any
	}{
		{"ListFirstPage", "idx_pending_uploads_workspace_list",
			`SELECT file_id FROM pending_uploads WHERE workspace_id = $1 AND acked_at IS NULL AND expires_at > now() ORDER BY created_at, file_id LIMIT 51`,
			[]any{ws}},
		{"ListAfterCursor", "idx_pending_uploads_workspace_list",
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
