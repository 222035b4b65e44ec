package pendinguploads_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

func TestListOrderAndFilters(t *testing.T) {
	s, pool := open(t)
	ctx := context.Background()
	ws, other := uuid.New(), uuid.New()
	a := mustStage(t, s, ws, "a.txt")
	mustStage(t, s, ws, "b.txt")
	acked := mustStage(t, s, ws, "acked.txt")
	expired := mustStage(t, s, ws, "expired.txt")
	mustStage(t, s, other, "theirs.txt")
	mustStage(t, s, ws, "c.txt")
	mustExec(t, pool, `UPDATE pending_uploads SET acked_at = now() WHERE file_id = $1`, acked.FileID)
	mustExec(t, pool, `UPDATE pending_uploads SET expires_at = now() - interval '1 second' WHERE file_id = $1`, expired.FileID)
	// Make the order depend on created_at, not on insertion: a is newest.
	mustExec(t, pool, `UPDATE pending_uploads SET created_at = created_at + interval '1 minute' WHERE file_id = $1`, a.FileID)

	recs, next, err := s.List(ctx, auth.AdminIdentity(), ws, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if next != nil {
		t.Fatalf("next cursor on the only page: %+v", next)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Filename)
		if r.Inline() != nil {
			t.Fatal("list returned bytes")
		}
	}
	if want := []string{"b.txt", "c.txt", "a.txt"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	empty, next, err := s.List(ctx, auth.AdminIdentity(), uuid.New(), 10, nil)
	if err != nil || len(empty) != 0 || next != nil || empty == nil {
		t.Fatalf("empty workspace: got %v %v %v, want an empty non-nil slice", empty, next, err)
	}
}

// TestListCursorWalk pages through rows of which many share created_at
// (one batch) and checks every row comes exactly once, in order.
func TestListCursorWalk(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	ws := uuid.New()
	var want []uuid.UUID
	for batch := 0; batch < 3; batch++ {
		items := make([]pendinguploads.File, 17)
		for i := range items {
			items[i] = pendinguploads.File{Content: []byte("x"), Filename: fmt.Sprintf("b%d-%d", batch, i)}
		}
		recs, err := s.Stage(ctx, auth.AdminIdentity(), ws, items)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			want = append(want, r.FileID)
		}
	}
	seen := map[uuid.UUID]int{}
	var order []pendinguploads.Record
	var after *pendinguploads.Cursor
	for page := 0; page < 100; page++ {
		recs, next, err := s.List(ctx, auth.AdminIdentity(), ws, 5, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			seen[r.FileID]++
			order = append(order, r)
		}
		if next == nil {
			break
		}
		// The cursor survives its string form.
		c, err := pendinguploads.DecodeCursor(next.Encode())
		if err != nil {
			t.Fatal(err)
		}
		after = &c
	}
	if len(seen) != len(want) {
		t.Fatalf("rows listed: got %d, want %d", len(seen), len(want))
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Fatalf("row %s listed %d times", id, seen[id])
		}
	}
	for i := 1; i < len(order); i++ {
		p, q := order[i-1], order[i]
		if q.CreatedAt.Before(p.CreatedAt) || (q.CreatedAt.Equal(p.CreatedAt) && q.FileID.String() <= p.FileID.String()) {
			t.Fatalf("rows %d and %d out of order", i-1, i)
		}
	}
}

func TestCursorRejectsForeignStrings(t *testing.T) {
	for _, s := range []string{"", "x", "not a cursor", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		if _, err := pendinguploads.DecodeCursor(s); !errors.Is(err, pendinguploads.ErrBadCursor) {
			t.Errorf("DecodeCursor(%q): got %v, want ErrBadCursor", s, err)
		}
	}
	c := pendinguploads.Cursor{CreatedAt: time.Date(2026, 5, 5, 10, 0, 0, 123456000, time.UTC), FileID: uuid.New()}
	got, err := pendinguploads.DecodeCursor(c.Encode())
	if err != nil || !got.CreatedAt.Equal(c.CreatedAt) || got.FileID != c.FileID {
		t.Fatalf("round trip: got %+v %v, want %+v", got, err, c)
	}
}
