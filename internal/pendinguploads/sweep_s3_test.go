package pendinguploads_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

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
