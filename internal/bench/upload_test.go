package bench

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// uploadSizes are the file sizes of BenchmarkUpload and BenchmarkContent.
var uploadSizes = []int{64 << 10, 1 << 20, 4 << 20}

// benchServer is the service with bytes in Postgres and a request cap
// that fits the largest size's multipart body (the default, 4 MiB, is the
// Lambda payload's; a 4 MiB file plus its part headers is just over it).
func benchServer(b *testing.B) *apptest.Server {
	// The workspace quota off: these benchmarks stage into one workspace
	// as often as the loop runs, and measure staging, not the quota.
	return apptest.NewServer(b, apptest.Options{Env: map[string]string{"MAX_REQUEST_BYTES": "8388608",
		"WORKSPACE_MAX_PENDING_BYTES": "0", "WORKSPACE_MAX_PENDING_FILES": "0"}})
}

// BenchmarkUpload compares a one-file multipart upload through the upload
// handler (auth, parse, sanitize, SHA-256, one transaction with the row
// and its activity row) with the baseline: one raw pgx INSERT of the same
// bytes into pending_uploads, on the same database.
func BenchmarkUpload(b *testing.B) {
	srv := benchServer(b)
	h := srv.App.API.Mux()
	ws := uuid.New()
	url := "/workspaces/" + ws.String() + "/chat/uploads"
	for _, size := range uploadSizes {
		content := payload(size)
		body, ctype := multipartBody(file{"bench.bin", content})
		sum := sha256.Sum256(content)
		b.Run("size="+sizeName(size)+"/handler", func(b *testing.B) {
			mustExec(b, srv, `TRUNCATE pending_uploads, activity_logs`)
			b.SetBytes(int64(size))
			for b.Loop() {
				serve(b, h, "POST", url, srv.AdminToken, ctype, body, 200)
			}
		})
		b.Run("size="+sizeName(size)+"/raw", func(b *testing.B) {
			mustExec(b, srv, `TRUNCATE pending_uploads, activity_logs`)
			b.SetBytes(int64(size))
			ctx := context.Background()
			for b.Loop() {
				if _, err := srv.Pool.Exec(ctx, `
					INSERT INTO pending_uploads (file_id, workspace_id, content, size_bytes, sha256, filename, mimetype, expires_at)
					VALUES ($1, $2, $3, $4, $5, $6, $7, now() + interval '24 hours')`,
					uuid.New(), ws, content, int64(size), sum[:], "bench.bin", "application/octet-stream"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkContent compares a fetch through the content handler (a
// workspace token's look-up, the row, the fetched_at stamp, the headers)
// with the baseline: one raw pgx SELECT of the same row's bytes.
func BenchmarkContent(b *testing.B) {
	srv := benchServer(b)
	h := srv.App.API.Mux()
	ws := uuid.New()
	tok := srv.WorkspaceToken(b, ws)
	for _, size := range uploadSizes {
		body, ctype := multipartBody(file{"bench.bin", payload(size)})
		res := serve(b, h, "POST", "/workspaces/"+ws.String()+"/chat/uploads", srv.AdminToken, ctype, body, 200)
		id := stagedID(b, res)
		url := "/workspaces/" + ws.String() + "/pending-uploads/" + id + "/content"
		b.Run("size="+sizeName(size)+"/handler", func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if s := serve(b, h, "GET", url, tok, "", nil, 200); s.n != size {
					b.Fatalf("got %d bytes, want %d", s.n, size)
				}
			}
		})
		b.Run("size="+sizeName(size)+"/raw", func(b *testing.B) {
			b.SetBytes(int64(size))
			ctx := context.Background()
			for b.Loop() {
				var content []byte
				if err := srv.Pool.QueryRow(ctx, `SELECT content FROM pending_uploads WHERE file_id = $1`, id).Scan(&content); err != nil {
					b.Fatal(err)
				}
				if len(content) != size {
					b.Fatalf("got %d bytes, want %d", len(content), size)
				}
			}
		})
	}
}

// BenchmarkBatch compares one multipart upload of 16 files with 16
// one-file uploads of the same files, and with one one-file upload: the
// batch should cost about one round trip, not sixteen.
func BenchmarkBatch(b *testing.B) {
	const n, size = 16, 4 << 10
	srv := benchServer(b)
	h := srv.App.API.Mux()
	url := "/workspaces/" + uuid.NewString() + "/chat/uploads"
	var files []file
	for i := range n {
		files = append(files, file{fmt.Sprintf("f%02d.bin", i), payload(size)[i:]})
	}
	batchBody, batchType := multipartBody(files...)
	singles := make([][]byte, n)
	singleTypes := make([]string, n)
	for i, f := range files {
		singles[i], singleTypes[i] = multipartBody(f)
	}
	b.Run("batch16", func(b *testing.B) {
		for b.Loop() {
			serve(b, h, "POST", url, srv.AdminToken, batchType, batchBody, 200)
		}
	})
	b.Run("single16", func(b *testing.B) {
		for b.Loop() {
			for i, body := range singles {
				serve(b, h, "POST", url, srv.AdminToken, singleTypes[i], body, 200)
			}
		}
	})
	b.Run("single1", func(b *testing.B) {
		for b.Loop() {
			serve(b, h, "POST", url, srv.AdminToken, singleTypes[0], singles[0], 200)
		}
	})
	mustExec(b, srv, `TRUNCATE pending_uploads, activity_logs`)
}
