package pendinguploads_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// TestFetchVisibility: a row is served while unacked and unexpired, and
// after its ack until the sweep; an expired unacked row, an absent one and
// another workspace's are not, and another workspace's bytes never leave
// Postgres.
func TestFetchVisibility(t *testing.T) {
	s, pool := open(t)
	ctx := context.Background()
	ws := uuid.New()
	acked := mustStage(t, s, ws, "acked.txt")
	ackedExpired := mustStage(t, s, ws, "acked-expired.txt")
	expired := mustStage(t, s, ws, "expired.txt")
	mustExec(t, pool, `UPDATE pending_uploads SET acked_at = now() WHERE file_id = ANY($1)`, []uuid.UUID{acked.FileID, ackedExpired.FileID})
	mustExec(t, pool, `UPDATE pending_uploads SET expires_at = now() - interval '1 second' WHERE file_id = ANY($1)`,
		[]uuid.UUID{expired.FileID, ackedExpired.FileID})

	for name, id := range map[string]uuid.UUID{"Acked": acked.FileID, "AckedPastExpiry": ackedExpired.FileID} {
		t.Run(name, func(t *testing.T) {
			rec, err := s.Fetch(ctx, auth.AdminIdentity(), ws, id, pendinguploads.Want{})
			if err != nil || rec.Inline() == nil || rec.FetchedAt == nil {
				t.Fatalf("got %+v, %v; want the row, its bytes, stamped", rec, err)
			}
		})
	}
	for name, id := range map[string]uuid.UUID{"Absent": uuid.New(), "Expired": expired.FileID} {
		t.Run("ErrNotFound"+name, func(t *testing.T) {
			if _, err := s.Fetch(ctx, auth.AdminIdentity(), ws, id, pendinguploads.Want{}); !errors.Is(err, pendinguploads.ErrNotFound) {
				t.Fatalf("got %v, want ErrNotFound", err)
			}
		})
	}
	t.Run("OtherWorkspaceIsErrNotFound", func(t *testing.T) {
		mine := mustStage(t, s, ws, "mine.txt")
		rec, err := s.Fetch(ctx, auth.AdminIdentity(), uuid.New(), mine.FileID, pendinguploads.Want{})
		if !errors.Is(err, pendinguploads.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound, as for a file that is not there", err)
		}
		if rec.Inline() != nil {
			t.Fatal("another workspace's bytes were returned")
		}
		var fetched *time.Time
		if err := pool.QueryRow(ctx, `SELECT fetched_at FROM pending_uploads WHERE file_id = $1`, mine.FileID).Scan(&fetched); err != nil || fetched != nil {
			t.Fatalf("another workspace's fetch stamped the row: %v, %v", fetched, err)
		}
	})
}

// TestFetchStampsInOneStatement: the look-up, the bytes of a small inline
// file and the fetched_at stamp are one statement; a later fetch moves
// the stamp; a refusal and an absence are one statement each.
func TestFetchStampsInOneStatement(t *testing.T) {
	s, _, tr := openTraced(t)
	ctx := context.Background()
	ws := uuid.New()
	rec, err := stageOne(ctx, s, ws, []byte("inline bytes"), "a.txt", "")
	if err != nil {
		t.Fatal(err)
	}
	before := tr.total()
	got, err := s.Fetch(ctx, auth.AdminIdentity(), ws, rec.FileID, pendinguploads.Want{})
	if err != nil || string(got.Inline()) != "inline bytes" || got.FetchedAt == nil {
		t.Fatalf("got %+v err=%v", got, err)
	}
	if n := tr.total() - before; n != 1 {
		t.Fatalf("statements: got %d, want 1", n)
	}
	time.Sleep(5 * time.Millisecond)
	again, err := s.Fetch(ctx, auth.AdminIdentity(), ws, rec.FileID, pendinguploads.Want{})
	if err != nil || !again.FetchedAt.After(*got.FetchedAt) {
		t.Fatalf("fetched_at did not move to the latest fetch: %v then %v (%v)", got.FetchedAt, again.FetchedAt, err)
	}
	other := mustStage(t, s, ws, "b.txt")
	before = tr.total()
	if _, err := s.Fetch(ctx, auth.AdminIdentity(), uuid.New(), other.FileID, pendinguploads.Want{}); !errors.Is(err, pendinguploads.ErrNotFound) {
		t.Fatalf("other workspace: got %v, want ErrNotFound", err)
	}
	if _, err := s.Fetch(ctx, auth.AdminIdentity(), ws, uuid.New(), pendinguploads.Want{}); !errors.Is(err, pendinguploads.ErrNotFound) {
		t.Fatalf("absent: got %v, want ErrNotFound", err)
	}
	if n := tr.total() - before; n != 2 {
		t.Fatalf("statements for a refusal and an absence: got %d, want 2 (one each)", n)
	}
}

// TestOpenLargeInline: an inline file larger than a chunk comes back whole
// and in any range, read a chunk at a time; Fetch does not carry its bytes.
func TestOpenLargeInline(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	ws := uuid.New()
	data := make([]byte, 2*pendinguploads.ChunkBytes+12345)
	rand.Read(data)
	put, err := stageOne(ctx, s, ws, data, "big.bin", "")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Fetch(ctx, auth.AdminIdentity(), ws, put.FileID, pendinguploads.Want{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Inline() != nil {
		t.Fatalf("Fetch carried %d bytes of a file over ChunkBytes", len(rec.Inline()))
	}
	size := int64(len(data))
	for _, r := range [][2]int64{{0, size}, {1, size - 1}, {pendinguploads.ChunkBytes - 1, 3}, {size - 1, 1}, {0, pendinguploads.ChunkBytes + 1}} {
		body, err := s.Open(ctx, rec, r[0], r[1])
		if err != nil {
			t.Fatalf("open %v: %v", r, err)
		}
		got, err := io.ReadAll(body)
		body.Close()
		if err != nil || !bytes.Equal(got, data[r[0]:r[0]+r[1]]) {
			t.Fatalf("range %v: got %d bytes (%v), want exactly the file's", r, len(got), err)
		}
	}
	if _, err := s.Open(ctx, rec, size-1, 2); err == nil {
		t.Fatal("a range past the end opened")
	}
}

// TestOpenSnapshot: once Open has returned, a sweep that deletes the row
// does not cut the file short (the reader's snapshot keeps it whole); a
// row swept before Open is ErrNotFound, before any byte is read.
func TestOpenSnapshot(t *testing.T) {
	s, pool := open(t)
	ctx := context.Background()
	ws := uuid.New()
	data := make([]byte, 3*pendinguploads.ChunkBytes)
	rand.Read(data)

	t.Run("SweptWhileReading", func(t *testing.T) {
		put, err := stageOne(ctx, s, ws, data, "a.bin", "")
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.Fetch(ctx, auth.AdminIdentity(), ws, put.FileID, pendinguploads.Want{})
		if err != nil {
			t.Fatal(err)
		}
		body, err := s.Open(ctx, rec, 0, rec.SizeBytes)
		if err != nil {
			t.Fatal(err)
		}
		defer body.Close()
		head := make([]byte, 10)
		if _, err := io.ReadFull(body, head); err != nil {
			t.Fatal(err)
		}
		mustExec(t, pool, `DELETE FROM pending_uploads WHERE file_id = $1`, rec.FileID)
		rest, err := io.ReadAll(body)
		if err != nil || !bytes.Equal(append(head, rest...), data) {
			t.Fatalf("after the delete: got %d bytes (%v), want the whole file", len(head)+len(rest), err)
		}
	})
	t.Run("ErrNotFoundSweptBeforeOpen", func(t *testing.T) {
		put, err := stageOne(ctx, s, ws, data, "b.bin", "")
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.Fetch(ctx, auth.AdminIdentity(), ws, put.FileID, pendinguploads.Want{})
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, pool, `DELETE FROM pending_uploads WHERE file_id = $1`, rec.FileID)
		if _, err := s.Open(ctx, rec, 0, rec.SizeBytes); !errors.Is(err, pendinguploads.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
}
