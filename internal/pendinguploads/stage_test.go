package pendinguploads_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/limits"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

func TestStageRoundTrip(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	ws := uuid.New()
	content := []byte{0x00, 0xff, 0xfe, 'b', 'i', 'n', 0x80} // not UTF-8
	rec, err := stageOne(ctx, s, ws, content, "blob.bin", "application/x-thing")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	if !bytes.Equal(rec.SHA256, sum[:]) || rec.SizeBytes != int64(len(content)) || rec.CreatedAt.IsZero() {
		t.Fatalf("put record: got %+v", rec)
	}
	if got := rec.ExpiresAt.Sub(rec.CreatedAt); got != config.DefaultUploadTTL {
		t.Fatalf("expires_at - created_at: got %v, want %v", got, config.DefaultUploadTTL)
	}
	got, err := s.Fetch(ctx, auth.AdminIdentity(), ws, rec.FileID, pendinguploads.Want{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Inline(), content) || got.Filename != "blob.bin" || got.Mimetype != "application/x-thing" ||
		!bytes.Equal(got.SHA256, sum[:]) || got.Key() != "" {
		t.Fatalf("get: got %+v", got)
	}
	if uri := rec.URI(); uri != "platform-pending:"+ws.String()+"/"+rec.FileID.String() {
		t.Fatalf("uri: got %s", uri)
	}
}

func TestStageTTL(t *testing.T) {
	s, _ := open(t)
	s.TTL = 90 * 60e9 // 90 minutes
	rec := mustStage(t, s, uuid.New(), "a.txt")
	if got := rec.ExpiresAt.Sub(rec.CreatedAt); got != s.TTL {
		t.Fatalf("expires_at - created_at: got %v, want %v", got, s.TTL)
	}
}

// TestStageValidationBeforeDatabase: a bad item is refused before any
// statement reaches Postgres: no row, no transaction.
func TestStageValidationBeforeDatabase(t *testing.T) {
	good := pendinguploads.File{Content: []byte("x"), Filename: "ok.txt"}
	cases := []struct {
		name  string
		items []pendinguploads.File
		want  error
		index int
	}{
		{"ErrEmptyContent", []pendinguploads.File{good, {Content: nil, Filename: "a"}}, pendinguploads.ErrEmptyContent, 1},
		{"ErrTooLarge", []pendinguploads.File{{Content: make([]byte, limits.DefaultFileBytes+1), Filename: "a"}}, pendinguploads.ErrTooLarge, 0},
		{"ErrEmptyFilename", []pendinguploads.File{good, good, {Content: []byte("x")}}, pendinguploads.ErrEmptyFilename, 2},
		{"ErrFilenameTooLong", []pendinguploads.File{{Content: []byte("x"), Filename: strings.Repeat("a", 101)}}, pendinguploads.ErrFilenameTooLong, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, pool, tr := openTraced(t)
			_, err := s.Stage(context.Background(), auth.AdminIdentity(), uuid.New(), c.items)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var ie *pendinguploads.ItemError
			if !errors.As(err, &ie) || ie.Index != c.index {
				t.Fatalf("item error: got %v, want index %d", err, c.index)
			}
			if n := tr.total(); n != 0 {
				t.Fatalf("statements sent: got %d, want 0", n)
			}
			if n := countRows(t, pool, "pending_uploads"); n != 0 {
				t.Fatalf("rows: got %d, want 0", n)
			}
		})
	}
	t.Run("ErrTooManyItems", func(t *testing.T) {
		s, _, tr := openTraced(t)
		items := make([]pendinguploads.File, limits.MaxFiles+1)
		for i := range items {
			items[i] = good
		}
		if _, err := s.Stage(context.Background(), auth.AdminIdentity(), uuid.New(), items); !errors.Is(err, pendinguploads.ErrTooManyItems) {
			t.Fatalf("got %v, want ErrTooManyItems", err)
		}
		if tr.total() != 0 {
			t.Fatalf("statements sent: got %d, want 0", tr.total())
		}
	})
	t.Run("MaxFileBytesAccepted", func(t *testing.T) {
		s, _ := open(t)
		big := bytes.Repeat([]byte{0xab}, limits.DefaultFileBytes)
		rec, err := stageOne(context.Background(), s, uuid.New(), big, "big.bin", "")
		if err != nil {
			t.Fatalf("a file of exactly the cap: %v", err)
		}
		if rec.SizeBytes != limits.DefaultFileBytes {
			t.Fatalf("size: got %d", rec.SizeBytes)
		}
	})
}

// TestStageOneStatement: N rows go to Postgres in one INSERT, not N.
func TestStageOneStatement(t *testing.T) {
	s, pool, tr := openTraced(t)
	ws := uuid.New()
	items := make([]pendinguploads.File, 16)
	for i := range items {
		items[i] = pendinguploads.File{Content: []byte(fmt.Sprintf("file %d", i)), Filename: fmt.Sprintf("f%02d.txt", i)}
	}
	recs, err := s.Stage(context.Background(), auth.AdminIdentity(), ws, items)
	if err != nil {
		t.Fatal(err)
	}
	if n := tr.count("INSERT INTO pending_uploads"); n != 1 {
		t.Fatalf("INSERT statements: got %d, want 1", n)
	}
	if n := countRows(t, pool, "pending_uploads"); n != 16 {
		t.Fatalf("rows: got %d, want 16", n)
	}
	for i, r := range recs { // input order, one shared created_at
		if r.Filename != items[i].Filename {
			t.Fatalf("record %d: got %s, want %s", i, r.Filename, items[i].Filename)
		}
		if !r.CreatedAt.Equal(recs[0].CreatedAt) {
			t.Fatalf("record %d created_at %v differs from %v", i, r.CreatedAt, recs[0].CreatedAt)
		}
	}
}

// TestStageRollsBackOnRowK: Postgres refuses row K (a NUL byte in a
// text column), and rows 0..K-1 are not stored either.
func TestStageRollsBackOnRowK(t *testing.T) {
	for _, k := range []int{0, 2, 3} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) {
			s, pool := open(t)
			items := make([]pendinguploads.File, 4)
			for i := range items {
				items[i] = pendinguploads.File{Content: []byte("x"), Filename: fmt.Sprintf("f%d", i)}
			}
			items[k].Filename = "bad\x00name"
			if _, err := s.Stage(context.Background(), auth.AdminIdentity(), uuid.New(), items); err == nil {
				t.Fatal("batch with a NUL byte accepted")
			}
			if n := countRows(t, pool, "pending_uploads"); n != 0 {
				t.Fatalf("rows after failed batch: got %d, want 0", n)
			}
		})
	}
}

// TestStageWritesActivityRows: each staged file has its activity_logs
// row, as the platform's workspaces expect to find it.
func TestStageWritesActivityRows(t *testing.T) {
	s, pool := open(t)
	ctx := context.Background()
	ws := uuid.New()
	items := []pendinguploads.File{{Content: []byte("a"), Filename: "a"}, {Content: []byte("b"), Filename: "b"}}
	recs, err := s.Stage(ctx, auth.AdminIdentity(), ws, items)
	if err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, pool, "pending_uploads"); n != 2 {
		t.Fatalf("rows: got %d, want 2", n)
	}
	if n := countRows(t, pool, "activity_logs"); n != 2 {
		t.Fatalf("activity rows: got %d, want 2", n)
	}
	var typ, method, target, summary, status, fileID, uri string
	var size int64
	err = pool.QueryRow(ctx, `SELECT activity_type, method, target_id::text, summary, status,
		request_body->>'file_id', request_body->>'uri', (request_body->>'size')::bigint
		FROM activity_logs WHERE summary = 'chat_upload_receive: b'`).Scan(&typ, &method, &target, &summary, &status, &fileID, &uri, &size)
	if err != nil {
		t.Fatal(err)
	}
	if typ != "a2a_receive" || method != "chat_upload_receive" || target != ws.String() || status != "ok" ||
		fileID != recs[1].FileID.String() || uri != recs[1].URI() || size != 1 {
		t.Fatalf("activity row: got %s %s %s %s %s %s %d", typ, method, target, status, fileID, uri, size)
	}
}

// TestStageOneRoundTrip: rows and activity rows go as one batch, with no
// BEGIN or COMMIT of their own (the batch is one implicit transaction),
// and a refusal of the activity rows takes the file rows with it.
func TestStageOneRoundTrip(t *testing.T) {
	s, pool, tr := openTraced(t)
	ctx := context.Background()
	items := []pendinguploads.File{{Content: []byte("a"), Filename: "a"}, {Content: []byte("b"), Filename: "b"}}
	if _, err := s.Stage(ctx, auth.AdminIdentity(), uuid.New(), items); err != nil {
		t.Fatal(err)
	}
	if tr.count("INSERT INTO pending_uploads") != 1 || tr.count("INSERT INTO activity_logs") != 1 || tr.count("begin") != 0 {
		t.Fatalf("statements: got %d row inserts, %d activity inserts, %d begins; want 1, 1, 0",
			tr.count("INSERT INTO pending_uploads"), tr.count("INSERT INTO activity_logs"), tr.count("begin"))
	}
	mustExec(t, pool, `ALTER TABLE activity_logs ADD CONSTRAINT refuse_all CHECK (false) NOT VALID`)
	if _, err := s.Stage(ctx, auth.AdminIdentity(), uuid.New(), items); err == nil {
		t.Fatal("stage with refused activity rows succeeded")
	}
	if n := countRows(t, pool, "pending_uploads"); n != 2 {
		t.Fatalf("rows: got %d, want the first stage's 2 only", n)
	}
}

// TestFileCapIsTheStores: MaxFileBytes (MAX_FILE_BYTES) moves the cap
// (the configuration holds it to 100 MiB).
func TestFileCapIsTheStores(t *testing.T) {
	s, _ := open(t)
	s.MaxFileBytes = 10
	if _, err := stageOne(context.Background(), s, uuid.New(), make([]byte, 11), "a", ""); !errors.Is(err, pendinguploads.ErrTooLarge) {
		t.Fatalf("11 bytes over a cap of 10: got %v, want ErrTooLarge", err)
	}
	if _, err := stageOne(context.Background(), s, uuid.New(), make([]byte, 10), "a", ""); err != nil {
		t.Fatalf("10 bytes under a cap of 10: %v", err)
	}
}

// staleDeadline is a context whose deadline has passed but which is not
// done: what the server sees of a request it runs only after the caller
// gave up (a batch that waited in the socket of a frozen Postgres).
type staleDeadline struct{ context.Context }

func (staleDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Second), true }

// TestStageAfterItsDeadlineStoresNothing: a staging batch the server runs
// after its request's deadline stores nothing and is "unavailable" (503),
// so a request answered 503 during a freeze does not commit on resume.
func TestStageAfterItsDeadlineStoresNothing(t *testing.T) {
	s, pool := open(t)
	items := []pendinguploads.File{{Content: []byte("a"), Filename: "a"}, {Content: []byte("b"), Filename: "b"}}
	_, err := s.Stage(staleDeadline{context.Background()}, auth.AdminIdentity(), uuid.New(), items)
	if !pendinguploads.IsUnavailable(err) {
		t.Fatalf("stage after the deadline: got %v, want an unavailable error", err)
	}
	if n := countRows(t, pool, "pending_uploads") + countRows(t, pool, "activity_logs"); n != 0 {
		t.Fatalf("rows: got %d, want 0", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Stage(ctx, auth.AdminIdentity(), uuid.New(), items); err != nil {
		t.Fatalf("stage within its deadline: %v", err)
	}
}

// TestStageInExecMode: behind RDS Proxy the pool runs in exec mode (no
// named prepared statements, docs/deploy.md); the stage's batch then goes
// unprepared, with the same result.
func TestStageInExecMode(t *testing.T) {
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			pool, err := pgxpool.New(context.Background(), pgtest.MustURL(t)+"&default_query_exec_mode="+mode)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			s := pendinguploads.New(pool, nil, apptest.StoreSettings())
			ctx := context.Background()
			ws := uuid.New()
			files := []pendinguploads.File{{Content: []byte{0, 1, 2, 0xff}, Filename: "a.bin"}, {Content: []byte("b"), Filename: "b \"quoted\" 'name'.txt", Mimetype: "text/plain"}}
			recs, err := s.Stage(ctx, auth.AdminIdentity(), ws, files)
			if err != nil {
				t.Fatal(err)
			}
			for i, rec := range recs {
				got, err := s.Fetch(ctx, auth.AdminIdentity(), ws, rec.FileID, pendinguploads.Want{})
				if err != nil || !bytes.Equal(got.Inline(), files[i].Content) || got.Filename != files[i].Filename || got.CreatedAt.IsZero() {
					t.Fatalf("file %d: %+v, %v", i, got, err)
				}
			}
		})
	}
}

// TestStageCountsOnce: under a quota, what waits is counted once per
// upload, by the statement that stores (it decides and reports from the
// same count), not once more before it.
func TestStageCountsOnce(t *testing.T) {
	s, _, tr := openTraced(t)
	s.MaxPendingFiles = 2
	ws := uuid.New()
	if _, err := stageOne(context.Background(), s, ws, []byte("a"), "a", ""); err != nil {
		t.Fatal(err)
	}
	if n := tr.count("count(*)"); n != 1 {
		t.Fatalf("statements that count: got %d, want 1", n)
	}
	_, err := s.Stage(context.Background(), auth.AdminIdentity(), ws, []pendinguploads.File{{Content: []byte("b"), Filename: "b"}, {Content: []byte("c"), Filename: "c"}})
	if qe, ok := errors.AsType[*pendinguploads.QuotaError](err); !ok || qe.Quota != "pending_files" || qe.Pending != 1 || qe.Adding != 2 {
		t.Fatalf("over the quota: got %v, want pending_files with 1 pending, 2 adding", err)
	}
	if n := tr.count("count(*)"); n != 2 {
		t.Fatalf("statements that count, after a refusal: got %d, want 2", n)
	}
}
