package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// BenchmarkList times the list handler (a workspace token's look-up and
// the first page of 50) on a workspace with 10k pending rows, as the
// table around it grows from 10k to 100k to 1M rows, and reports p50/p99
// over every iteration (run it with -benchtime Nx). It also times a page
// from the middle of the workspace's rows (cursor at row 5000). The other
// rows belong to 1000 other workspaces, half of them acked; each size is
// built with one INSERT … SELECT generate_series and a VACUUM ANALYZE.
func BenchmarkList(b *testing.B) {
	srv := benchServer(b)
	h := srv.App.API.Mux()
	ws := uuid.New()
	tok := srv.WorkspaceToken(b, ws)
	const mine = 10_000
	mustExec(b, srv, `
		INSERT INTO pending_uploads (workspace_id, content, size_bytes, sha256, filename, mimetype, created_at, expires_at)
		SELECT $1, '\x78'::bytea, 1, sha256('\x78'::bytea), 'f' || g || '.txt', 'text/plain',
		       now() - interval '1 hour' + g * interval '1 millisecond', now() + interval '24 hours'
		FROM generate_series(1, $2::int) g`, ws, mine)
	var midAt time.Time
	var midID uuid.UUID
	if err := srv.Pool.QueryRow(context.Background(), `
		SELECT created_at, file_id FROM pending_uploads WHERE workspace_id = $1
		ORDER BY created_at, file_id OFFSET 4999 LIMIT 1`, ws).Scan(&midAt, &midID); err != nil {
		b.Fatal(err)
	}
	mid := pendinguploads.Cursor{CreatedAt: midAt, FileID: midID}.Encode()
	first := "/workspaces/" + ws.String() + "/pending-uploads"
	page := first + "?after=" + mid

	rows := mine
	for _, size := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("rows=%dk", size/1000), func(b *testing.B) {
			if more := size - rows; more > 0 {
				mustExec(b, srv, `
					INSERT INTO pending_uploads (workspace_id, content, size_bytes, sha256, filename, mimetype,
					                             created_at, expires_at, acked_at)
					SELECT md5((g % 1000)::text)::uuid, '\x78'::bytea, 1, sha256('\x78'::bytea), 'o' || g || '.txt', '',
					       now() - interval '2 hours' + g * interval '1 microsecond', now() + interval '24 hours',
					       CASE WHEN g % 2 = 0 THEN now() END
					FROM generate_series($1::int, $2::int) g`, rows, size-1)
				rows = size
			}
			mustExec(b, srv, `VACUUM ANALYZE pending_uploads`)
			var firstD, midD []time.Duration
			for b.Loop() {
				t0 := time.Now()
				serve(b, h, "GET", first, tok, "", nil, 200)
				t1 := time.Now()
				serve(b, h, "GET", page, tok, "", nil, 200)
				firstD = append(firstD, t1.Sub(t0))
				midD = append(midD, time.Since(t1))
			}
			b.ReportMetric(ms(percentile(firstD, 50)), "p50-ms")
			b.ReportMetric(ms(percentile(firstD, 99)), "p99-ms")
			b.ReportMetric(ms(percentile(midD, 50)), "mid-p50-ms")
			b.ReportMetric(ms(percentile(midD, 99)), "mid-p99-ms")
			b.ReportMetric(float64(rows), "table-rows")
		})
	}
}
