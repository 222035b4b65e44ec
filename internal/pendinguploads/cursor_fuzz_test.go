package pendinguploads_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// FuzzCursor: DecodeCursor never panics and refuses with ErrBadCursor
// only; any string it accepts re-encodes to itself (there is one spelling
// of each cursor); Encode then Decode gives back the position, at
// Postgres's microsecond precision.
func FuzzCursor(f *testing.F) {
	valid := pendinguploads.Cursor{
		CreatedAt: time.Date(2026, 5, 4, 12, 0, 0, 123456000, time.UTC),
		FileID:    uuid.MustParse("0b9e0a4e-6a58-4a8e-9f35-0d5f6c1c2b3a"),
	}
	f.Add(valid.Encode(), int64(1_777_000_000_000_000), valid.FileID[:])
	f.Add("", int64(0), []byte{})
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", int64(-1), make([]byte, 16))
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", int64(1<<62), []byte("0123456789abcdef"))
	f.Add("////////////////////////////////", int64(-1<<63), []byte("short"))
	f.Fuzz(func(t *testing.T, s string, micros int64, id []byte) {
		c, err := pendinguploads.DecodeCursor(s)
		if err != nil {
			if !errors.Is(err, pendinguploads.ErrBadCursor) {
				t.Fatalf("DecodeCursor(%q): got %v, want ErrBadCursor", s, err)
			}
		} else if got := c.Encode(); got != s {
			t.Fatalf("DecodeCursor(%q) re-encodes as %q", s, got)
		}

		var in pendinguploads.Cursor
		in.CreatedAt = time.UnixMicro(micros)
		copy(in.FileID[:], id)
		out, err := pendinguploads.DecodeCursor(in.Encode())
		// Rows are stamped by the database's clock: a cursor outside
		// 1970..3000 was never made from a row, and Postgres would refuse
		// its far ends, so it is refused as a 400, not a 500.
		if inRange := micros >= 0 && in.CreatedAt.Before(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)); !inRange {
			if !errors.Is(err, pendinguploads.ErrBadCursor) {
				t.Fatalf("Decode(Encode(%v)): got %v, want ErrBadCursor", in, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Decode(Encode(%v)): %v", in, err)
		}
		if !out.CreatedAt.Equal(in.CreatedAt) || out.FileID != in.FileID {
			t.Fatalf("Decode(Encode(%v)) = %v", in, out)
		}
		if out.CreatedAt.Location() != time.UTC {
			t.Fatalf("decoded time in %v, want UTC", out.CreatedAt.Location())
		}
	})
}
