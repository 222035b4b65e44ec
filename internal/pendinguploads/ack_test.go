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
)

func TestAck(t *testing.T) {
	s, pool := open(t)
	ctx := context.Background()
	ws := uuid.New()

	t.Run("Acked", func(t *testing.T) {
		rec := mustStage(t, s, ws, "a.txt")
		res, err := s.Ack(ctx, auth.AdminIdentity(), ws, rec.FileID)
		if err != nil || res != pendinguploads.Acked {
			t.Fatalf("got %v, %v; want Acked", res, err)
		}
		// Acked rows stay readable until swept (the canvas re-opens them).
		if _, err := s.Fetch(ctx, auth.AdminIdentity(), ws, rec.FileID, pendinguploads.Want{}); err != nil {
			t.Fatalf("fetch after ack: got %v, want the row until the sweep", err)
		}
	})
	t.Run("AlreadyAckedKeepsAckedAt", func(t *testing.T) {
		rec := mustStage(t, s, ws, "b.txt")
		if _, err := s.Ack(ctx, auth.AdminIdentity(), ws, rec.FileID); err != nil {
			t.Fatal(err)
		}
		first := ackedAt(t, pool, rec.FileID)
		time.Sleep(5 * time.Millisecond)
		res, err := s.Ack(ctx, auth.AdminIdentity(), ws, rec.FileID)
		if err != nil || res != pendinguploads.AlreadyAcked {
			t.Fatalf("got %v, %v; want AlreadyAcked", res, err)
		}
		if again := ackedAt(t, pool, rec.FileID); !again.Equal(first) {
			t.Fatalf("acked_at moved: %v then %v", first, again)
		}
	})
	t.Run("ErrNotFoundWhenAbsent", func(t *testing.T) {
		if _, err := s.Ack(ctx, auth.AdminIdentity(), ws, uuid.New()); !errors.Is(err, pendinguploads.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("ErrNotFoundWhenExpired", func(t *testing.T) {
		rec := mustStage(t, s, ws, "c.txt")
		mustExec(t, pool, `UPDATE pending_uploads SET expires_at = now() - interval '1 second' WHERE file_id = $1`, rec.FileID)
		if _, err := s.Ack(ctx, auth.AdminIdentity(), ws, rec.FileID); !errors.Is(err, pendinguploads.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("OtherWorkspaceIsErrNotFoundLeavesRowUnacked", func(t *testing.T) {
		rec := mustStage(t, s, ws, "d.txt")
		if _, err := s.Ack(ctx, auth.AdminIdentity(), uuid.New(), rec.FileID); !errors.Is(err, pendinguploads.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound, as for a file that is not there", err)
		}
		if _, err := s.Fetch(ctx, auth.AdminIdentity(), ws, rec.FileID, pendinguploads.Want{}); err != nil {
			t.Fatalf("row no longer visible to its owner: %v", err)
		}
		if n := ackedCount(t, pool, rec.FileID); n != 0 {
			t.Fatalf("another workspace's ack acked the row")
		}
	})
}

// TestAckRacesSweepAndItself runs, for real and under -race, many acks of
// the same files at once while sweeps with zero retention delete acked
// rows. Every ack must succeed (Acked, AlreadyAcked or SweptMeanwhile) or find the
// row already swept (ErrNotFound); exactly one ack per file is Acked, and
// nothing else goes wrong.
func TestAckRacesSweepAndItself(t *testing.T) {
	s, pool := open(t)
	ctx := context.Background()
	ws := uuid.New()
	const files, ackers = 20, 8
	ids := make([]uuid.UUID, files)
	for i := range ids {
		ids[i] = mustStage(t, s, ws, "f.txt").FileID
	}

	var mu sync.Mutex
	acked := map[uuid.UUID]int{}
	var wg sync.WaitGroup
	errs := make(chan error, files*ackers+16)
	for a := 0; a < ackers; a++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, id := range ids {
				res, err := s.Ack(ctx, auth.AdminIdentity(), ws, id)
				switch {
				case errors.Is(err, pendinguploads.ErrNotFound): // swept already
				case err != nil:
					errs <- err
				case res == pendinguploads.Acked:
					mu.Lock()
					acked[id]++
					mu.Unlock()
				}
			}
		}()
	}
	sweptTotal := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 16; i++ {
			res, err := s.Sweep(ctx, 0)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			sweptTotal += res.Acked + res.Expired
			mu.Unlock()
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, id := range ids {
		if acked[id] != 1 {
			t.Errorf("file %s: %d acks reported Acked, want exactly 1", id, acked[id])
		}
	}
	res, err := s.Sweep(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sweptTotal+res.Acked != files || res.Expired != 0 {
		t.Fatalf("swept %d during the race and %+v after, want %d acked in all", sweptTotal, res, files)
	}
	if n := countRows(t, pool, "pending_uploads"); n != 0 {
		t.Fatalf("rows left: %d", n)
	}
}

func ackedAt(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) time.Time {
	t.Helper()
	var at *time.Time
	if err := pool.QueryRow(context.Background(), `SELECT acked_at FROM pending_uploads WHERE file_id = $1`, id).Scan(&at); err != nil {
		t.Fatal(err)
	}
	if at == nil {
		t.Fatal("acked_at not set")
	}
	return *at
}

func ackedCount(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM pending_uploads WHERE file_id = $1 AND acked_at IS NOT NULL`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
