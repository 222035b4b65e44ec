package bench

import (
	"context"
	"crypto/sha256"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// latencySizes are the file sizes of BenchmarkLatency's upload and content.
var latencySizes = []int{64 << 10, 1 << 20}

// benchRTT is the round trip of BenchmarkLatency's network mode: BENCH_RTT
// (a Go duration), 1ms by default.
func benchRTT(b *testing.B) time.Duration {
	v := os.Getenv("BENCH_RTT")
	if v == "" {
		return time.Millisecond
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("BENCH_RTT=%q: want a positive duration", v)
	}
	return d
}

// BenchmarkLatency compares the handlers, called with a workspace token,
// with raw pgx statements doing the same database work, twice: on
// loopback (rtt=0) and with Postgres behind a proxy that adds half of
// BENCH_RTT to each direction (rtt=1ms by default), the service's pool and
// the baseline's alike. Where the handler makes one round trip, as the
// raw statement does, the ratio stays near 1 as the round trip grows.
// Each handler also reports its round trips per call (trips/op).
//
//	upload   a one-file multipart upload vs a raw INSERT of the row
//	content  the file's bytes vs a raw SELECT of them
//	list     the first page (50 of 200) vs a raw SELECT of that page
//	ack      an ack (again: the row is acked after the first) vs a raw
//	         UPDATE of acked_at
func BenchmarkLatency(b *testing.B) {
	for _, rtt := range []time.Duration{0, benchRTT(b)} {
		name := "rtt=" + rtt.String()
		if rtt == 0 {
			name = "rtt=0"
		}
		b.Run(name, func(b *testing.B) { latencyAt(b, rtt) })
	}
}

func latencyAt(b *testing.B, rtt time.Duration) {
	srv := apptest.NewServer(b, apptest.Options{
		// The workspace quota off: the loop stages into one workspace.
		Env: map[string]string{"MAX_REQUEST_BYTES": "8388608",
			"WORKSPACE_MAX_PENDING_BYTES": "0", "WORKSPACE_MAX_PENDING_FILES": "0"},
		DBDelay:         rtt / 2,
		CountRoundTrips: true,
	})
	h := srv.App.API.Mux()
	ws := uuid.New()
	tok := srv.WorkspaceToken(b, ws)
	ctx := context.Background()
	handler := func(b *testing.B, call func()) {
		call() // warm: statements prepared, the token stamped
		call()
		srv.RoundTrips.Reset()
		n := 0
		for b.Loop() {
			call()
			n++
		}
		b.ReportMetric(float64(srv.RoundTrips.Count())/float64(n), "trips/op")
	}

	uploadURL := "/workspaces/" + ws.String() + "/chat/uploads"
	for _, size := range latencySizes {
		content := payload(size)
		body, ctype := multipartBody(file{"bench.bin", content})
		sum := sha256.Sum256(content)
		b.Run("upload/size="+sizeName(size)+"/handler", func(b *testing.B) {
			b.SetBytes(int64(size))
			handler(b, func() { serve(b, h, "POST", uploadURL, tok, ctype, body, 200) })
		})
		b.Run("upload/size="+sizeName(size)+"/raw", func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := srv.Pool.Exec(ctx, `
					INSERT INTO pending_uploads (file_id, workspace_id, content, size_bytes, sha256, filename, mimetype, expires_at)
					VALUES ($1, $2, $3, $4, $5, $6, $7, now() + interval '24 hours')`,
					uuid.New(), ws, content, int64(size), sum[:], "bench.bin", "application/octet-stream"); err != nil {
					b.Fatal(err)
				}
			}
		})
		mustExec(b, srv, `DELETE FROM pending_uploads WHERE workspace_id = $1`, ws)

		res := serve(b, h, "POST", uploadURL, srv.AdminToken, ctype, body, 200)
		id := stagedID(b, res)
		contentURL := "/workspaces/" + ws.String() + "/pending-uploads/" + id + "/content"
		b.Run("content/size="+sizeName(size)+"/handler", func(b *testing.B) {
			b.SetBytes(int64(size))
			handler(b, func() {
				if s := serve(b, h, "GET", contentURL, tok, "", nil, 200); s.n != size {
					b.Fatalf("got %d bytes, want %d", s.n, size)
				}
			})
		})
		b.Run("content/size="+sizeName(size)+"/raw", func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				var got []byte
				if err := srv.Pool.QueryRow(ctx, `SELECT content FROM pending_uploads WHERE file_id = $1`, id).Scan(&got); err != nil || len(got) != size {
					b.Fatalf("got %d bytes, %v", len(got), err)
				}
			}
		})
		mustExec(b, srv, `DELETE FROM pending_uploads WHERE workspace_id = $1`, ws)
	}

	mustExec(b, srv, `
		INSERT INTO pending_uploads (workspace_id, content, size_bytes, sha256, filename, mimetype, created_at, expires_at)
		SELECT $1, '\x78'::bytea, 1, sha256('\x78'::bytea), 'f' || g || '.txt', 'text/plain',
		       now() - interval '1 hour' + g * interval '1 millisecond', now() + interval '24 hours'
		FROM generate_series(1, 200) g`, ws)
	var ackID uuid.UUID
	if err := srv.Pool.QueryRow(ctx, `SELECT file_id FROM pending_uploads WHERE workspace_id = $1 LIMIT 1`, ws).Scan(&ackID); err != nil {
		b.Fatal(err)
	}
	ackURL := "/workspaces/" + ws.String() + "/pending-uploads/" + ackID.String() + "/ack"
	b.Run("ack/handler", func(b *testing.B) {
		handler(b, func() { serve(b, h, "POST", ackURL, tok, "", nil, 200) })
	})
	b.Run("ack/raw", func(b *testing.B) {
		for b.Loop() {
			if _, err := srv.Pool.Exec(ctx, `UPDATE pending_uploads SET acked_at = coalesce(acked_at, now()) WHERE file_id = $1 AND expires_at > now()`, ackID); err != nil {
				b.Fatal(err)
			}
		}
	})
	mustExec(b, srv, `UPDATE pending_uploads SET acked_at = NULL WHERE file_id = $1`, ackID)
	listURL := "/workspaces/" + ws.String() + "/pending-uploads"
	b.Run("list/handler", func(b *testing.B) {
		handler(b, func() { serve(b, h, "GET", listURL, tok, "", nil, 200) })
	})
	b.Run("list/raw", func(b *testing.B) {
		for b.Loop() {
			rows, err := srv.Pool.Query(ctx, `
				SELECT file_id, workspace_id, filename, mimetype, size_bytes, sha256, created_at, fetched_at, expires_at
				FROM pending_uploads WHERE workspace_id = $1 AND acked_at IS NULL AND expires_at > now()
				ORDER BY created_at, file_id LIMIT 51`, ws)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rows.Next() {
				n++
			}
			if rows.Close(); rows.Err() != nil || n != 51 {
				b.Fatalf("got %d rows, %v", n, rows.Err())
			}
		}
	})
}
