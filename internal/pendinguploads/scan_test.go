package pendinguploads_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// heard records what a Notifier was told.
type heard struct {
	mu  sync.Mutex
	ids []uuid.UUID
}

func (h *heard) Notify(_ context.Context, _ uuid.UUID, ids []uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids = append(h.ids, ids...)
}

func (h *heard) count(id uuid.UUID) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, x := range h.ids {
		if x == id {
			n++
		}
	}
	return n
}

// openScanned returns a scanned store over a fresh database and a moto
// bucket, with a recording Notifier.
func openScanned(t *testing.T) (*pendinguploads.Store, *pgxpool.Pool, pendinguploads.Bucket, *heard) {
	t.Helper()
	ep := s3test.MustStart(t)
	client, bucket := s3test.NewBucket(t, ep)
	pool := pgtest.MustOpen(t)
	blobs := s3blobs.NewFromClient(client, bucket)
	settings := apptest.StoreSettings()
	settings.Scanned = true
	s := pendinguploads.New(pool, blobs, settings)
	h := &heard{}
	s.Notifier = h
	return s, pool, blobs, h
}

// visible reports whether the workspace's list shows fileID, and whether
// a fetch finds it.
func visible(t *testing.T, s *pendinguploads.Store, ws, fileID uuid.UUID) (listed, fetched bool) {
	t.Helper()
	ctx := context.Background()
	recs, _, err := s.List(ctx, auth.AdminIdentity(), ws, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		listed = listed || r.FileID == fileID
	}
	_, err = s.Fetch(ctx, auth.AdminIdentity(), ws, fileID, pendinguploads.Want{})
	switch {
	case err == nil:
		fetched = true
	case !errors.Is(err, pendinguploads.ErrNotFound):
		t.Fatalf("fetch: %v", err)
	}
	return listed, fetched
}

func activityRows(t *testing.T, pool *pgxpool.Pool, fileID uuid.UUID) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM activity_logs WHERE request_body->>'file_id' = $1`, fileID.String()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func scanState(t *testing.T, s *pendinguploads.Store, ws, fileID uuid.UUID) pendinguploads.FileScan {
	t.Helper()
	st, err := s.ScanStates(context.Background(), auth.AdminIdentity(), ws, []uuid.UUID{fileID})
	if err != nil {
		t.Fatal(err)
	}
	return st[fileID]
}

// TestScannedFileWaitsForItsVerdict: on a scanned deployment a small file
// goes to the bucket, and until its clean verdict it is neither listed,
// fetched, acked, logged in activity_logs nor announced; the verdict
// delivers it once, its expiry counted from staging; a repeated or late
// result (after the ack) changes nothing and is no error.
func TestScannedFileWaitsForItsVerdict(t *testing.T) {
	ctx := context.Background()
	s, pool, _, h := openScanned(t)
	ws := uuid.New()
	rec, err := stageOne(ctx, s, ws, []byte("hello"), "hello.txt", "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Key() == "" {
		t.Fatal("a small file of a scanned deployment kept inline: the scanner reads objects")
	}
	if l, f := visible(t, s, ws, rec.FileID); l || f {
		t.Fatalf("before the verdict: listed %v, fetched %v; want neither", l, f)
	}
	if _, err := s.Ack(ctx, auth.AdminIdentity(), ws, rec.FileID); !errors.Is(err, pendinguploads.ErrNotFound) {
		t.Fatalf("ack before the verdict: got %v, want ErrNotFound", err)
	}
	if n := activityRows(t, pool, rec.FileID); n != 0 {
		t.Fatalf("activity rows before the verdict: %d, want 0", n)
	}
	if n := h.count(rec.FileID); n != 0 {
		t.Fatalf("hints before the verdict: %d, want 0", n)
	}
	if got := scanState(t, s, ws, rec.FileID); got.State != pendinguploads.ScanPending {
		t.Fatalf("state: got %+v, want pending", got)
	}

	d, err := s.Decide(ctx, rec.Key(), pendinguploads.Deliver, "NO_THREATS_FOUND", "")
	if err != nil || !d.Changed || d.State != pendinguploads.ScanClean || d.WorkspaceID != ws || d.Filename != "hello.txt" {
		t.Fatalf("clean verdict: got %+v, %v", d, err)
	}
	if l, f := visible(t, s, ws, rec.FileID); !l || !f {
		t.Fatalf("after the clean verdict: listed %v, fetched %v; want both", l, f)
	}
	if n := activityRows(t, pool, rec.FileID); n != 1 {
		t.Fatalf("activity rows after the verdict: %d, want 1", n)
	}
	if n := h.count(rec.FileID); n != 1 {
		t.Fatalf("hints after the verdict: %d, want 1", n)
	}
	// Delivered, the file waits for the workspace: in its running total.
	if got := totalOf(t, pool, ws); got.Files != 1 || got.Bytes != 5 {
		t.Fatalf("the workspace's total after the verdict: %+v, want 1 file of 5 bytes", got)
	}
	assertTotalsRecount(t, pool)
	var created, expires time.Time
	if err := pool.QueryRow(ctx, `SELECT created_at, expires_at FROM pending_uploads WHERE file_id = $1`, rec.FileID).Scan(&created, &expires); err != nil {
		t.Fatal(err)
	}
	if !created.Equal(rec.CreatedAt) || !expires.Equal(rec.ExpiresAt) {
		t.Fatalf("delivered row's created/expires %v/%v, want staging's %v/%v", created, expires, rec.CreatedAt, rec.ExpiresAt)
	}
	if got := scanState(t, s, ws, rec.FileID); got.State != pendinguploads.ScanClean || got.Result != "NO_THREATS_FOUND" {
		t.Fatalf("state: got %+v, want clean NO_THREATS_FOUND", got)
	}

	// Repeated, then after the ack, then a contrary late result: nothing moves.
	for i, late := range []pendinguploads.Verdict{pendinguploads.Deliver, pendinguploads.Block, pendinguploads.Hold} {
		if i == 1 {
			if _, err := s.Ack(ctx, auth.AdminIdentity(), ws, rec.FileID); err != nil {
				t.Fatal(err)
			}
		}
		d, err := s.Decide(ctx, rec.Key(), late, "THREATS_FOUND", "late")
		if err != nil || d.Changed || d.State != pendinguploads.ScanClean {
			t.Fatalf("late %v: got %+v, %v; want unchanged, clean", late, d, err)
		}
	}
	if n := activityRows(t, pool, rec.FileID); n != 1 {
		t.Fatalf("activity rows after repeats: %d, want 1", n)
	}
	if n := h.count(rec.FileID); n != 1 {
		t.Fatalf("hints after repeats: %d, want 1", n)
	}
	assertTotalsRecount(t, pool)
}

// TestInfectedFileIsNeverDelivered: THREATS_FOUND blocks the file and
// deletes its object; the sender reads "blocked" without the threat's
// name; a repeated result, or a clean one arriving after it (any order),
// changes nothing.
func TestInfectedFileIsNeverDelivered(t *testing.T) {
	ctx := context.Background()
	s, pool, blobs, h := openScanned(t)
	ws := uuid.New()
	rec, err := stageOne(ctx, s, ws, []byte("pretend this is EICAR"), "bad.com", "")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		d, err := s.Decide(ctx, rec.Key(), pendinguploads.Block, "THREATS_FOUND", "EICAR-Test-File (not a virus)")
		if err != nil || d.State != pendinguploads.ScanBlocked {
			t.Fatalf("threats found: got %+v, %v", d, err)
		}
	}
	if _, err := blobs.Open(ctx, rec.Key(), 0, 1); !errors.Is(err, pendinguploads.ErrBlobNotFound) {
		t.Fatalf("the blocked file's object: got %v, want it gone", err)
	}
	d, err := s.Decide(ctx, rec.Key(), pendinguploads.Deliver, "NO_THREATS_FOUND", "")
	if err != nil || d.Changed || d.State != pendinguploads.ScanBlocked {
		t.Fatalf("a clean result after the block: got %+v, %v; want unchanged, blocked", d, err)
	}
	if l, f := visible(t, s, ws, rec.FileID); l || f {
		t.Fatalf("blocked: listed %v, fetched %v; want neither", l, f)
	}
	if n := activityRows(t, pool, rec.FileID); n != 0 || h.count(rec.FileID) != 0 {
		t.Fatalf("blocked file announced: %d activity rows, %d hints", n, h.count(rec.FileID))
	}
	got := scanState(t, s, ws, rec.FileID)
	if got.State != pendinguploads.ScanBlocked || got.Result != "THREATS_FOUND" {
		t.Fatalf("state: got %+v, want blocked THREATS_FOUND", got)
	}
	var reason string
	if err := pool.QueryRow(ctx, `SELECT reason FROM scanned_uploads WHERE file_id = $1`, rec.FileID).Scan(&reason); err != nil || reason != "EICAR-Test-File (not a virus)" {
		t.Fatalf("the record's reason: %q, %v", reason, err)
	}
	// Another workspace learns nothing of it.
	if other := scanState(t, s, uuid.New(), rec.FileID); other.State != "" {
		t.Fatalf("another workspace reads %+v", other)
	}
}

// TestUndecidedFileIsHeld: an undecidable result holds the file (the
// hold policy), HeldScans lists it, a later clean result still delivers
// it; a scan that never answers is held by DecideOverdue; keys that are
// not files of ours are ignored.
func TestUndecidedFileIsHeld(t *testing.T) {
	ctx := context.Background()
	s, _, _, h := openScanned(t)
	ws := uuid.New()
	a, err := stageOne(ctx, s, ws, []byte("a zip with a password"), "a.zip", "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := stageOne(ctx, s, ws, []byte("never answered"), "b.bin", "")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := s.Decide(ctx, a.Key(), pendinguploads.Hold, "UNSUPPORTED", ""); err != nil || d.State != pendinguploads.ScanHeld {
		t.Fatalf("unsupported: got %+v, %v", d, err)
	}
	over, err := s.DecideOverdue(ctx, 0, pendinguploads.Hold)
	if err != nil || len(over) != 1 || over[0].FileID != b.FileID {
		t.Fatalf("overdue: got %+v, %v; want b alone", over, err)
	}
	held, err := s.HeldScans(ctx, 10)
	if err != nil || len(held) != 2 {
		t.Fatalf("held: got %+v, %v; want 2", held, err)
	}
	if l, f := visible(t, s, ws, a.FileID); l || f {
		t.Fatalf("held: listed %v, fetched %v; want neither", l, f)
	}
	if d, err := s.Decide(ctx, a.Key(), pendinguploads.Deliver, "NO_THREATS_FOUND", ""); err != nil || !d.Changed {
		t.Fatalf("clean after held: got %+v, %v", d, err)
	}
	if l, _ := visible(t, s, ws, a.FileID); !l || h.count(a.FileID) != 1 {
		t.Fatalf("held then clean: listed %v, hints %d", l, h.count(a.FileID))
	}
	for _, key := range []string{"staging/" + ws.String() + "/" + a.FileID.String(), "objects/x/y", "objects/" + ws.String() + "/" + uuid.NewString()} {
		if d, err := s.Decide(ctx, key, pendinguploads.Deliver, "NO_THREATS_FOUND", ""); err != nil || d.Changed || d.State != "" {
			t.Fatalf("key %q: got %+v, %v; want nothing", key, d, err)
		}
	}
}

// TestOperatorDecidesHeldFiles: an operator's release (DecideHeld,
// Deliver) delivers a held file exactly as a clean result does (listed,
// fetched, one activity row, one hint, the expiry from staging), recorded
// as the operator's with what the scan had said; an operator's block
// refuses one for good, its object deleted as for THREATS_FOUND. Both are
// idempotent; only held files move (a pending file, a delivered one asked
// to be blocked, a blocked one asked to be released: ErrNotHeld); a file
// named under another workspace, or none, is ErrNotFound and moves nothing.
func TestOperatorDecidesHeldFiles(t *testing.T) {
	ctx := context.Background()
	s, pool, blobs, h := openScanned(t)
	ws, other := uuid.New(), uuid.New()
	stage := func(name string) pendinguploads.Record {
		t.Helper()
		rec, err := stageOne(ctx, s, ws, []byte("the bytes of "+name), name, "")
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	rel, blk, waiting := stage("locked.zip"), stage("odd.bin"), stage("waiting.txt")
	for _, r := range []pendinguploads.Record{rel, blk} {
		if d, err := s.Decide(ctx, r.Key(), pendinguploads.Hold, "UNSUPPORTED", "password-protected"); err != nil || d.State != pendinguploads.ScanHeld {
			t.Fatalf("hold %s: got %+v, %v", r.Filename, d, err)
		}
	}

	t.Run("ErrNotFound", func(t *testing.T) {
		for _, v := range []pendinguploads.Verdict{pendinguploads.Deliver, pendinguploads.Block} {
			for _, c := range []struct{ ws, file uuid.UUID }{{other, rel.FileID}, {ws, uuid.New()}} {
				if d, err := s.DecideHeld(ctx, c.ws, c.file, v); !errors.Is(err, pendinguploads.ErrNotFound) || d.Changed {
					t.Fatalf("%v %v of %v: got %+v, %v; want ErrNotFound", v, c.file, c.ws, d, err)
				}
			}
		}
		if got := scanState(t, s, ws, rel.FileID); got.State != pendinguploads.ScanHeld {
			t.Fatalf("after another workspace's release: %+v, want held", got)
		}
	})

	t.Run("Release", func(t *testing.T) {
		for i := range 2 {
			d, err := s.DecideHeld(ctx, ws, rel.FileID, pendinguploads.Deliver)
			if err != nil || d.State != pendinguploads.ScanClean || d.Changed != (i == 0) || d.Filename != "locked.zip" {
				t.Fatalf("release #%d: got %+v, %v", i+1, d, err)
			}
		}
		if l, f := visible(t, s, ws, rel.FileID); !l || !f {
			t.Fatalf("released: listed %v, fetched %v; want both", l, f)
		}
		if n := activityRows(t, pool, rel.FileID); n != 1 || h.count(rel.FileID) != 1 {
			t.Fatalf("released: %d activity rows, %d hints; want 1, 1", n, h.count(rel.FileID))
		}
		var staged, expires, delivered time.Time
		if err := pool.QueryRow(ctx, `
			SELECT s.created_at, s.expires_at, p.expires_at FROM scanned_uploads s JOIN pending_uploads p USING (file_id)
			WHERE file_id = $1`, rel.FileID).Scan(&staged, &expires, &delivered); err != nil || !delivered.Equal(expires) {
			t.Fatalf("released expiry: %v, staged %v, delivered %v; want staging's", err, expires, delivered)
		}
		got := scanState(t, s, ws, rel.FileID)
		if got.State != pendinguploads.ScanClean || got.Result != pendinguploads.ResultOperator {
			t.Fatalf("released state: %+v", got)
		}
		var reason string
		if err := pool.QueryRow(ctx, `SELECT reason FROM scanned_uploads WHERE file_id = $1`, rel.FileID).Scan(&reason); err != nil ||
			reason != "released by an operator; the scan said UNSUPPORTED: password-protected" {
			t.Fatalf("released record: %q, %v", reason, err)
		}
		if d, err := s.DecideHeld(ctx, ws, rel.FileID, pendinguploads.Block); !errors.Is(err, pendinguploads.ErrNotHeld) || d.State != pendinguploads.ScanClean {
			t.Fatalf("block after release: got %+v, %v; want ErrNotHeld, clean", d, err)
		}
	})

	t.Run("Block", func(t *testing.T) {
		for i := range 2 {
			d, err := s.DecideHeld(ctx, ws, blk.FileID, pendinguploads.Block)
			if err != nil || d.State != pendinguploads.ScanBlocked || d.Changed != (i == 0) {
				t.Fatalf("block #%d: got %+v, %v", i+1, d, err)
			}
		}
		if _, err := blobs.Open(ctx, blk.Key(), 0, 1); !errors.Is(err, pendinguploads.ErrBlobNotFound) {
			t.Fatalf("the blocked file's object: got %v, want it gone", err)
		}
		if l, f := visible(t, s, ws, blk.FileID); l || f || activityRows(t, pool, blk.FileID) != 0 || h.count(blk.FileID) != 0 {
			t.Fatalf("blocked: listed %v, fetched %v, announced", l, f)
		}
		got := scanState(t, s, ws, blk.FileID)
		if got.State != pendinguploads.ScanBlocked || got.Result != pendinguploads.ResultOperator {
			t.Fatalf("blocked state: %+v", got)
		}
		if d, err := s.DecideHeld(ctx, ws, blk.FileID, pendinguploads.Deliver); !errors.Is(err, pendinguploads.ErrNotHeld) || d.State != pendinguploads.ScanBlocked {
			t.Fatalf("release after block: got %+v, %v; want ErrNotHeld, blocked", d, err)
		}
		// A clean result arriving late changes nothing either.
		if d, err := s.Decide(ctx, blk.Key(), pendinguploads.Deliver, "NO_THREATS_FOUND", ""); err != nil || d.Changed {
			t.Fatalf("clean after the operator's block: got %+v, %v", d, err)
		}
	})

	t.Run("ErrNotHeld", func(t *testing.T) {
		for _, v := range []pendinguploads.Verdict{pendinguploads.Deliver, pendinguploads.Block} {
			if d, err := s.DecideHeld(ctx, ws, waiting.FileID, v); !errors.Is(err, pendinguploads.ErrNotHeld) || d.State != pendinguploads.ScanPending || d.Changed {
				t.Fatalf("%v of a file waiting for its scan: got %+v, %v; want ErrNotHeld", v, d, err)
			}
		}
		if _, err := blobs.Open(ctx, waiting.Key(), 0, 1); err != nil {
			t.Fatalf("the waiting file's object: %v", err)
		}
	})
}

// TestQuotaCountsFilesUnderScan: a file waiting for its scan counts
// against the workspace's quota; a blocked one does not.
func TestQuotaCountsFilesUnderScan(t *testing.T) {
	ctx := context.Background()
	s, _, _, _ := openScanned(t)
	s.MaxPendingFiles = 1
	ws := uuid.New()
	first, err := stageOne(ctx, s, ws, []byte("one"), "one.txt", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stageOne(ctx, s, ws, []byte("two"), "two.txt", ""); !errors.As(err, new(*pendinguploads.QuotaError)) {
		t.Fatalf("second file while the first is under scan: got %v, want a QuotaError", err)
	}
	if _, err := s.Decide(ctx, first.Key(), pendinguploads.Block, "THREATS_FOUND", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := stageOne(ctx, s, ws, []byte("two"), "two.txt", ""); err != nil {
		t.Fatalf("after the block: %v", err)
	}
}

// TestScannedCommitOverTheQuota: a commit whose files no longer fit,
// because a file staged since its presign waits for its scan, is refused
// with the QuotaError the storing statement counted (413), not as a lost
// claim (500), and stores nothing.
func TestScannedCommitOverTheQuota(t *testing.T) {
	ctx := context.Background()
	s, _, _, _ := openScanned(t)
	s.MaxPendingFiles = 1
	ws := uuid.New()
	data := []byte("presigned while nothing waited")
	puts, err := s.Presign(ctx, auth.AdminIdentity(), ws, []pendinguploads.Declared{{Filename: "put.bin", Size: int64(len(data))}})
	if err != nil {
		t.Fatal(err)
	}
	putPresigned(t, puts[0], data)
	if _, err := stageOne(ctx, s, ws, []byte("staged since"), "since.txt", ""); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Commit(ctx, auth.AdminIdentity(), ws, []uuid.UUID{puts[0].UploadID})
	var qe *pendinguploads.QuotaError
	if !errors.As(err, &qe) || qe.Quota != "pending_files" || qe.Pending != 1 {
		t.Fatalf("commit over the quota: got %v, want a QuotaError pending_files with 1 pending", err)
	}
	waiting, err := s.WaitingScans(ctx, 10)
	if err != nil || len(waiting) != 1 {
		t.Fatalf("waiting: %+v, %v; want the staged file alone", waiting, err)
	}
}

// TestSweepDeletesExpiredScans: a file whose scan never answered goes
// with its object once expired.
func TestSweepDeletesExpiredScans(t *testing.T) {
	ctx := context.Background()
	s, pool, blobs, _ := openScanned(t)
	ws := uuid.New()
	rec, err := stageOne(ctx, s, ws, []byte("stuck"), "stuck.txt", "")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, pool, `UPDATE scanned_uploads SET expires_at = now() - interval '1 second'`)
	res, err := s.Sweep(ctx, time.Hour)
	if err != nil || res.Expired != 1 {
		t.Fatalf("sweep: got %+v, %v; want 1 expired", res, err)
	}
	if n := countRows(t, pool, "scanned_uploads"); n != 0 {
		t.Fatalf("scanned rows after the sweep: %d", n)
	}
	if _, err := blobs.Open(ctx, rec.Key(), 0, 1); !errors.Is(err, pendinguploads.ErrBlobNotFound) {
		t.Fatalf("the expired file's object: got %v, want it gone", err)
	}
	if d, err := s.Decide(ctx, rec.Key(), pendinguploads.Deliver, "NO_THREATS_FOUND", ""); err != nil || d.Changed {
		t.Fatalf("a result after the sweep: got %+v, %v; want nothing", d, err)
	}
}

// TestSweepOfScansStopsAndResumes: the expired scans' pass is bounded as
// the sweep's others are: past MaxSweepBatches it stops, says unfinished,
// and the next sweep resumes where rows are left.
func TestSweepOfScansStopsAndResumes(t *testing.T) {
	ctx := context.Background()
	s, pool, _, _ := openScanned(t)
	s.SweepBatch, s.MaxSweepBatches = 1, 1
	ws := uuid.New()
	for _, name := range []string{"a.txt", "b.txt"} {
		if _, err := stageOne(ctx, s, ws, []byte(name), name, ""); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(t, pool, `UPDATE scanned_uploads SET expires_at = now() - interval '1 second'`)
	res, err := s.Sweep(ctx, time.Hour)
	if err != nil || res.Expired != 1 || !res.Unfinished {
		t.Fatalf("first sweep: got %+v, %v; want 1 expired, unfinished", res, err)
	}
	if n := countRows(t, pool, "scanned_uploads"); n != 1 {
		t.Fatalf("scanned rows after the first sweep: %d, want 1", n)
	}
	s.MaxSweepBatches = 10
	if res, err := s.Sweep(ctx, time.Hour); err != nil || res.Expired != 1 || res.Unfinished {
		t.Fatalf("second sweep: got %+v, %v; want the other, finished", res, err)
	}
	if n := countRows(t, pool, "scanned_uploads"); n != 0 {
		t.Fatalf("scanned rows after the second sweep: %d", n)
	}
}

// TestScannedStageRefusesAnUnknownWorkspace: on a standalone database
// that refuses unknown workspaces, a scanned deployment's stage for a
// workspace no token was made for is ErrUnknownWorkspace (404), as an
// unscanned one's: nothing waits for a scan.
func TestScannedStageRefusesAnUnknownWorkspace(t *testing.T) {
	ctx := context.Background()
	s, pool, _, _ := openScanned(t)
	s.RefuseUnknownWorkspaces = true
	if _, err := stageOne(ctx, s, uuid.New(), []byte("nobody's"), "x.txt", ""); !errors.Is(err, pendinguploads.ErrUnknownWorkspace) {
		t.Fatalf("stage for an unknown workspace: got %v, want ErrUnknownWorkspace", err)
	}
	if n := countRows(t, pool, "scanned_uploads"); n != 0 {
		t.Fatalf("scanned rows after the refusal: %d", n)
	}
}

// TestScannedCommit: on a scanned deployment a commit of presigned
// uploads stages its file for the scan (not listed, no hint), the object
// the scanner reads is the committed one under objects/ (the staging
// copy gone), and a retried commit replays the same file while it waits,
// and after its verdict.
func TestScannedCommit(t *testing.T) {
	ctx := context.Background()
	s, _, blobs, h := openScanned(t)
	ws := uuid.New()
	data := []byte("bytes put straight into the bucket")
	puts, err := s.Presign(ctx, auth.AdminIdentity(), ws, []pendinguploads.Declared{{Filename: "put.bin", Size: int64(len(data))}})
	if err != nil {
		t.Fatal(err)
	}
	putPresigned(t, puts[0], data)
	recs, replayed, err := s.Commit(ctx, auth.AdminIdentity(), ws, []uuid.UUID{puts[0].UploadID})
	if err != nil || replayed || len(recs) != 1 {
		t.Fatalf("commit: %v, replayed %v, %d files", err, replayed, len(recs))
	}
	rec := recs[0]
	if l, f := visible(t, s, ws, rec.FileID); l || f || h.count(rec.FileID) != 0 {
		t.Fatalf("before the verdict: listed %v, fetched %v, hints %d", l, f, h.count(rec.FileID))
	}
	waiting, err := s.WaitingScans(ctx, 10)
	if err != nil || len(waiting) != 1 || waiting[0].Key != "objects/"+ws.String()+"/"+rec.FileID.String() || waiting[0].SizeBytes != int64(len(data)) {
		t.Fatalf("waiting: %+v, %v; want the committed object", waiting, err)
	}
	if _, err := blobs.Open(ctx, "staging/"+ws.String()+"/"+puts[0].UploadID.String(), 0, 1); !errors.Is(err, pendinguploads.ErrBlobNotFound) {
		t.Fatalf("the staging copy: %v, want it gone", err)
	}
	for _, when := range []string{"waiting", "delivered"} {
		if when == "delivered" {
			if _, err := s.Decide(ctx, waiting[0].Key, pendinguploads.Deliver, "NO_THREATS_FOUND", ""); err != nil {
				t.Fatal(err)
			}
		}
		again, replayed, err := s.Commit(ctx, auth.AdminIdentity(), ws, []uuid.UUID{puts[0].UploadID})
		if err != nil || !replayed || len(again) != 1 || again[0].FileID != rec.FileID {
			t.Fatalf("retried commit (%s): %+v, replayed %v, %v", when, again, replayed, err)
		}
	}
	if l, f := visible(t, s, ws, rec.FileID); !l || !f {
		t.Fatalf("after the verdict: listed %v, fetched %v", l, f)
	}
}
