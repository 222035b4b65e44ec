package pendinguploads_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/limits"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// TestOnThePlatformsDatabase: the store on the platform's database (either
// CHECK): staging for a workspace the platform knows writes rows and the
// activity rows its feed reads, up to a 30 MiB file under a raised cap;
// staging for one it does not know is ErrUnknownWorkspace with nothing
// stored; a row the platform's own server staged (no digest) is listed,
// served byte-exact, acked and swept.
func TestOnThePlatformsDatabase(t *testing.T) {
	for _, cap100 := range []bool{false, true} {
		t.Run(fmt.Sprintf("Cap100MiB=%v", cap100), func(t *testing.T) {
			ctx := context.Background()
			pool, err := pgxpool.New(ctx, pgtest.MustPlatformURL(t, cap100))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			s := pendinguploads.New(pool, nil, apptest.StoreSettings())
			s.MaxFileBytes = limits.MaxFileBytes
			ws := uuid.New()
			mustExec(t, pool, `INSERT INTO workspaces (id, name) VALUES ($1, 'w')`, ws)

			big := bytes.Repeat([]byte{7}, 30<<20)
			recs, err := s.Stage(ctx, auth.AdminIdentity(), ws, []pendinguploads.File{{Content: []byte("a"), Filename: "a.txt"}, {Content: big, Filename: "big.bin"}})
			if err != nil || len(recs) != 2 {
				t.Fatalf("stage for a known workspace: %v", err)
			}
			var activity int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM activity_logs WHERE workspace_id = $1 AND method = 'chat_upload_receive'`, ws).Scan(&activity); err != nil || activity != 2 {
				t.Fatalf("activity rows: got %d (%v), want 2", activity, err)
			}

			before := countRows(t, pool, "pending_uploads")
			_, err = s.Stage(ctx, auth.AdminIdentity(), uuid.New(), []pendinguploads.File{{Content: []byte("x"), Filename: "x"}})
			if !errors.Is(err, pendinguploads.ErrUnknownWorkspace) {
				t.Fatalf("stage for an unknown workspace: got %v, want ErrUnknownWorkspace", err)
			}
			if n := countRows(t, pool, "pending_uploads"); n != before {
				t.Fatalf("rows after the refused stage: got %d, want %d", n, before)
			}

			var id uuid.UUID
			data := []byte("staged by the platform")
			if err := pool.QueryRow(ctx, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename)
				VALUES ($1, $2, $3, 'old.txt') RETURNING file_id`, ws, data, len(data)).Scan(&id); err != nil {
				t.Fatal(err)
			}
			listed, _, err := s.List(ctx, auth.AdminIdentity(), ws, 100, nil)
			if err != nil || len(listed) != 3 {
				t.Fatalf("list: got %d rows (%v), want 3", len(listed), err)
			}
			rec, err := s.Fetch(ctx, auth.AdminIdentity(), ws, id, pendinguploads.Want{})
			if err != nil || rec.SHA256 != nil {
				t.Fatalf("fetch the platform's row: %+v, %v; want it, without a digest", rec, err)
			}
			body, err := s.Open(ctx, rec, 0, rec.SizeBytes)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(body)
			body.Close()
			if !bytes.Equal(got, data) {
				t.Fatalf("bytes: got %q", got)
			}
			if res, err := s.Ack(ctx, auth.AdminIdentity(), ws, id); err != nil || res != pendinguploads.Acked {
				t.Fatalf("ack: %v, %v", res, err)
			}
			swept, err := s.Sweep(ctx, 0)
			if err != nil || swept.Acked != 1 {
				t.Fatalf("sweep: %+v, %v; want the acked row", swept, err)
			}
		})
	}
}
