package pendinguploads_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

func TestGetHidesInvisibleRows(t *testing.T) {
	s, pool := open(t)
	ctx := context.Background()
	ws := uuid.New()
	acked := mustPut(t, s, ws, "acked.txt")
	expired := mustPut(t, s, ws, "expired.txt")
	mustExec(t, pool, `UPDATE pending_uploads SET acked_at = now() WHERE file_id = $1`, acked.FileID)
	mustExec(t, pool, `UPDATE pending_uploads SET expires_at = now() - interval '1 second' WHERE file_id = $1`, expired.FileID)

	for name, id := range map[string]uuid.UUID{"Absent": uuid.New(), "Acked": acked.FileID, "Expired": expired.FileID} {
		t.Run(name, func(t *testing.T) {
			if _, err := s.Get(ctx, ws, id); !errors.Is(err, pendinguploads.ErrNotFound) {
				t.Fatalf("got %v, want ErrNotFound", err)
			}
		})
	}
	t.Run("ErrWrongWorkspace", func(t *testing.T) {
		mine := mustPut(t, s, ws, "mine.txt")
		rec, err := s.Get(ctx, uuid.New(), mine.FileID)
		if !errors.Is(err, pendinguploads.ErrWrongWorkspace) {
			t.Fatalf("got %v, want ErrWrongWorkspace", err)
		}
		if rec.Content != nil {
			t.Fatal("another workspace's bytes were returned")
		}
	})
}

func TestMarkFetched(t *testing.T) {
	s, pool := open(t)
	ctx := context.Background()
	ws := uuid.New()
	rec := mustPut(t, s, ws, "a.txt")

	if err := s.MarkFetched(ctx, ws, rec.FileID); err != nil {
		t.Fatal(err)
	}
	first := fetchedAt(t, s, ws, rec.FileID)
	time.Sleep(5 * time.Millisecond)
	if err := s.MarkFetched(ctx, ws, rec.FileID); err != nil {
		t.Fatal(err)
	}
	if second := fetchedAt(t, s, ws, rec.FileID); !second.After(first) {
		t.Fatalf("fetched_at did not move to the latest fetch: %v then %v", first, second)
	}

	t.Run("ErrNotFoundForOtherWorkspace", func(t *testing.T) {
		if err := s.MarkFetched(ctx, uuid.New(), rec.FileID); !errors.Is(err, pendinguploads.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("ErrNotFoundWhenAcked", func(t *testing.T) {
		mustExec(t, pool, `UPDATE pending_uploads SET acked_at = now() WHERE file_id = $1`, rec.FileID)
		if err := s.MarkFetched(ctx, ws, rec.FileID); !errors.Is(err, pendinguploads.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("ErrNotFoundWhenExpired", func(t *testing.T) {
		r := mustPut(t, s, ws, "b.txt")
		mustExec(t, pool, `UPDATE pending_uploads SET expires_at = now() - interval '1 second' WHERE file_id = $1`, r.FileID)
		if err := s.MarkFetched(ctx, ws, r.FileID); !errors.Is(err, pendinguploads.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("ErrNotFoundWhenAbsent", func(t *testing.T) {
		if err := s.MarkFetched(ctx, ws, uuid.New()); !errors.Is(err, pendinguploads.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
}

func fetchedAt(t *testing.T, s *pendinguploads.Store, ws, id uuid.UUID) time.Time {
	t.Helper()
	r, err := s.Get(context.Background(), ws, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.FetchedAt == nil {
		t.Fatal("fetched_at not set")
	}
	return *r.FetchedAt
}

// TestFetchStampsInlineInOneStatement: an inline row is read and stamped
// by one statement; another workspace's row is neither read nor stamped.
func TestFetchStampsInlineInOneStatement(t *testing.T) {
	s, pool, tr := openTraced(t)
	ctx := context.Background()
	ws := uuid.New()
	rec, err := s.Put(ctx, ws, []byte("inline bytes"), "a.txt", "")
	if err != nil {
		t.Fatal(err)
	}
	before := tr.total()
	got, stamped, err := s.Fetch(ctx, ws, rec.FileID)
	if err != nil || !stamped || string(got.Content) != "inline bytes" || got.FetchedAt == nil {
		t.Fatalf("got %+v stamped=%v err=%v", got, stamped, err)
	}
	if n := tr.total() - before; n != 1 {
		t.Fatalf("statements: got %d, want 1", n)
	}
	other := mustPut(t, s, ws, "b.txt")
	before = tr.total()
	if _, _, err := s.Fetch(ctx, uuid.New(), other.FileID); !errors.Is(err, pendinguploads.ErrWrongWorkspace) {
		t.Fatalf("other workspace: got %v, want ErrWrongWorkspace", err)
	}
	if _, _, err := s.Fetch(ctx, ws, uuid.New()); !errors.Is(err, pendinguploads.ErrNotFound) {
		t.Fatalf("absent: got %v, want ErrNotFound", err)
	}
	if n := tr.total() - before; n != 2 {
		t.Fatalf("statements for a refusal and an absence: got %d, want 2 (one each)", n)
	}
	var fetched *time.Time
	if err := pool.QueryRow(ctx, `SELECT fetched_at FROM pending_uploads WHERE file_id = $1`, other.FileID).Scan(&fetched); err != nil || fetched != nil {
		t.Fatalf("another workspace's fetch stamped the row: %v, %v", fetched, err)
	}
}
