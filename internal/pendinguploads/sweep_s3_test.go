package pendinguploads_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"

	"github.com/jackc/pgx/v5/pgxpool"
)

// faultyBlobs fails Delete once: before deleting anything (failBefore) or
// after deleting everything (failAfter: the objects are gone, the caller
// is told otherwise).
type faultyBlobs struct {
	pendinguploads.Bucket
	failBefore, failAfter, refuseFirst atomic.Bool
}

func (f *faultyBlobs) Delete(ctx context.Context, keys []string) error {
	if f.failBefore.Swap(false) {
		return errors.New("injected: S3 unreachable")
	}
	if f.refuseFirst.Swap(false) && len(keys) > 1 {
		// S3 deletes all but the first key and refuses that one.
		if err := f.Bucket.Delete(ctx, keys[1:]); err != nil {
			return err
		}
		return &pendinguploads.PartialDeleteError{Refused: keys[:1], Err: errors.New("injected: AccessDenied")}
	}
	err := f.Bucket.Delete(ctx, keys)
	if f.failAfter.Swap(false) {
		return errors.New("injected: connection lost after the delete")
	}
	return err
}

// faultyDB fails the sweep's row delete once, after the objects are gone.
type faultyDB struct {
	*pgxpool.Pool
	failRowDelete atomic.Bool
}

func (f *faultyDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if strings.Contains(sql, "file_id = ANY") && f.failRowDelete.Swap(false) {
		return pgconn.CommandTag{}, errors.New("injected: connection lost before the row delete")
	}
	return f.Pool.Exec(ctx, sql, args...)
}

// TestSweepHealsAfterS3Faults: a fault between the object delete and the
// row delete, either way round, leaves nothing the next sweep does not
// finish, and no workspace is ever handed a row whose object is gone.
func TestSweepHealsAfterS3Faults(t *testing.T) {
	ep := s3test.MustStart(t)
	client, bucket := s3test.NewBucket(t, ep)
	cases := []struct {
		name   string
		inject func(*faultyBlobs, *faultyDB)
	}{
		{"S3FailsBeforeDeleting", func(b *faultyBlobs, _ *faultyDB) { b.failBefore.Store(true) }},
		{"S3FailsAfterDeleting", func(b *faultyBlobs, _ *faultyDB) { b.failAfter.Store(true) }},
		{"RowDeleteFailsAfterObjectsGone", func(_ *faultyBlobs, d *faultyDB) { d.failRowDelete.Store(true) }},
		{"S3RefusesOneKey", func(b *faultyBlobs, _ *faultyDB) { b.refuseFirst.Store(true) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			db := &faultyDB{Pool: pgtest.MustOpen(t)}
			blobs := &faultyBlobs{Bucket: s3blobs.NewFromClient(client, bucket)}
			s := pendinguploads.New(db, blobs, apptest.StoreSettings())
			s.InlineMaxBytes = 1
			ws := uuid.New()
			var keys []string
			for i := 0; i < 3; i++ {
				rec, err := stageOne(ctx, s, ws, []byte("bytes in the bucket"), "f.bin", "")
				if err != nil {
					t.Fatal(err)
				}
				if rec.Key() == "" {
					t.Fatal("row kept inline, want the bucket")
				}
				keys = append(keys, rec.Key())
				if _, err := s.Ack(ctx, auth.AdminIdentity(), ws, rec.FileID); err != nil {
					t.Fatal(err)
				}
			}
			live, err := stageOne(ctx, s, ws, []byte("still pending"), "live.bin", "")
			if err != nil {
				t.Fatal(err)
			}

			c.inject(blobs, db)
			if _, err := s.Sweep(ctx, 0); err == nil {
				t.Fatal("sweep with an injected fault reported no error")
			}
			if c.name == "S3RefusesOneKey" {
				// The refused key's row stays; the other two acked rows went.
				var left int
				if err := db.QueryRow(ctx, `SELECT count(*) FROM pending_uploads WHERE acked_at IS NOT NULL`).Scan(&left); err != nil || left != 1 {
					t.Fatalf("acked rows after a partial refusal: got %d (%v), want 1", left, err)
				}
			}
			// Whatever is left is invisible: acked rows are never served.
			if recs, _, err := s.List(ctx, auth.AdminIdentity(), ws, 10, nil); err != nil || len(recs) != 1 || recs[0].FileID != live.FileID {
				t.Fatalf("visible after the failed sweep: %v, %v", recs, err)
			}

			res, err := s.Sweep(ctx, 0)
			if err != nil {
				t.Fatalf("next sweep: %v", err)
			}
			var rows int
			if err := db.QueryRow(ctx, `SELECT count(*) FROM pending_uploads`).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows != 1 {
				t.Fatalf("rows after the healing sweep: got %d, want 1 (the live one); swept %+v", rows, res)
			}
			for _, k := range keys {
				if _, err := blobs.Open(ctx, k, 0, 1); !errors.Is(err, pendinguploads.ErrBlobNotFound) {
					t.Fatalf("object %s: got %v, want it gone", k, err)
				}
			}
			body, err := blobs.Open(ctx, live.Key(), 0, 1)
			if err != nil {
				t.Fatalf("the live file's object: %v", err)
			}
			body.Close()
		})
	}
}

// deleteLog records every key the sweep asks the bucket to delete.
type deleteLog struct {
	pendinguploads.Bucket
	mu      sync.Mutex
	deleted map[string]int
}

func (d *deleteLog) Delete(ctx context.Context, keys []string) error {
	d.mu.Lock()
	for _, k := range keys {
		d.deleted[k]++
	}
	d.mu.Unlock()
	return d.Bucket.Delete(ctx, keys)
}

// TestSweepResumes: a sweep cut short (its batches spent, or its deadline
// too near to start one) says so, loses nothing and deletes nothing it
// should not; the next sweep finishes where it stopped, and every object
// is deleted exactly once. The acked rows share one acked_at, so the
// batches' cursor moves by file_id across the cut.
func TestSweepResumes(t *testing.T) {
	ep := s3test.MustStart(t)
	client, bucket := s3test.NewBucket(t, ep)
	ctx := context.Background()
	pool := pgtest.MustOpen(t)
	blobs := &deleteLog{Bucket: s3blobs.NewFromClient(client, bucket), deleted: map[string]int{}}
	s := pendinguploads.New(pool, blobs, apptest.StoreSettings())
	s.InlineMaxBytes = 1
	ws := uuid.New()
	var keys []string
	for i := 0; i < 10; i++ {
		rec, err := stageOne(ctx, s, ws, []byte("bytes in the bucket"), "f.bin", "")
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, rec.Key())
		set := `acked_at = now() - interval '2 hours'`
		if i >= 7 {
			set = `expires_at = now() - interval '1 minute'`
		}
		mustExec(t, pool, `UPDATE pending_uploads SET `+set+` WHERE file_id = $1`, rec.FileID)
	}
	live, err := stageOne(ctx, s, ws, []byte("still pending"), "live.bin", "")
	if err != nil {
		t.Fatal(err)
	}
	s.SweepBatch = 3
	s.MaxSweepBatches = 2

	t.Run("DeadlineTooNear", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, pendinguploads.SweepReserve/2)
		defer cancel()
		res, err := s.Sweep(dctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if res != (pendinguploads.SweepResult{Unfinished: true}) {
			t.Fatalf("got %+v, want nothing deleted, unfinished", res)
		}
		if n := countRows(t, pool, "pending_uploads"); n != 11 {
			t.Fatalf("rows: got %d, want 11", n)
		}
	})
	t.Run("BatchesSpent", func(t *testing.T) {
		// Acked: two batches of 3, then cut; expired: 3, and an empty batch.
		res, err := s.Sweep(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if want := (pendinguploads.SweepResult{Acked: 6, Expired: 3, Unfinished: true}); res != want {
			t.Fatalf("got %+v, want %+v", res, want)
		}
	})
	t.Run("NextSweepFinishes", func(t *testing.T) {
		res, err := s.Sweep(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if want := (pendinguploads.SweepResult{Acked: 1}); res != want {
			t.Fatalf("got %+v, want %+v", res, want)
		}
		if n := countRows(t, pool, "pending_uploads"); n != 1 {
			t.Fatalf("rows: got %d, want 1 (the live one)", n)
		}
		for _, k := range keys {
			if blobs.deleted[k] != 1 {
				t.Errorf("object %s: deleted %d times, want once", k, blobs.deleted[k])
			}
		}
		if len(blobs.deleted) != len(keys) {
			t.Errorf("objects deleted: got %d, want %d", len(blobs.deleted), len(keys))
		}
		body, err := blobs.Open(ctx, live.Key(), 0, 1)
		if err != nil {
			t.Fatalf("the live file's object: %v", err)
		}
		body.Close()
	})
}

// TestSweepResumesInline: the same cut and resumption without a bucket,
// where one statement selects and deletes each batch.
func TestSweepResumesInline(t *testing.T) {
	s, pool := open(t)
	ctx := context.Background()
	mustExec(t, pool, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, acked_at)
		SELECT gen_random_uuid(), 'x', 1, 'f', now() - interval '2 hours' FROM generate_series(1, 25)`)
	s.SweepBatch = 10
	s.MaxSweepBatches = 2
	res, err := s.Sweep(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if want := (pendinguploads.SweepResult{Acked: 20, Unfinished: true}); res != want {
		t.Fatalf("first sweep: got %+v, want %+v", res, want)
	}
	res, err = s.Sweep(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if want := (pendinguploads.SweepResult{Acked: 5}); res != want {
		t.Fatalf("second sweep: got %+v, want %+v", res, want)
	}
	if n := countRows(t, pool, "pending_uploads"); n != 0 {
		t.Fatalf("rows left: %d", n)
	}
}
