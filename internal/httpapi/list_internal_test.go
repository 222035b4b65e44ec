package httpapi

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// listedFile and listBody are the list's answer as encoding/json writes
// it: the shape appendList must write byte for byte.
type listedFile struct {
	FileID    string     `json:"file_id"`
	URI       string     `json:"uri"`
	Name      string     `json:"name"`
	MimeType  string     `json:"mimeType"`
	Size      int64      `json:"size"`
	SHA256    *string    `json:"sha256"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	FetchedAt *time.Time `json:"fetched_at"`
}

type listBody struct {
	Uploads    []listedFile `json:"uploads"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// TestAppendListIsEncodingJSON: the hand-written list answer is, byte for
// byte, what encoding/json writes for the same rows: names and types with
// every character that needs escaping (and some that encoding/json
// escapes for HTML), no digest, no fetch, times in any zone, with and
// without a next page.
func TestAppendListIsEncodingJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	odd := []string{"a.txt", `q"uote`, `back\\slash`, "tab\tnl\ncr\r", "bell\a\b\f", "<tag>&amp;", "del\x7f", "ünïcode.pdf", "\u2028sep", ""}
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+1800), time.Local}
	for round := range 200 {
		n := rng.IntN(52)
		recs := make([]pendinguploads.Record, n)
		want := listBody{Uploads: make([]listedFile, n)}
		for i := range recs {
			r := pendinguploads.Record{FileID: uuid.New(), WorkspaceID: uuid.New(), Filename: odd[rng.IntN(len(odd))],
				Mimetype: odd[rng.IntN(len(odd))], SizeBytes: rng.Int64N(1 << 40),
				CreatedAt: time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))]),
				ExpiresAt: time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))])}
			if rng.IntN(2) == 0 {
				r.SHA256 = make([]byte, 32)
				for k := range r.SHA256 {
					r.SHA256[k] = byte(rng.UintN(256))
				}
			}
			if rng.IntN(2) == 0 {
				f := time.Unix(rng.Int64N(4e9), int64(rng.IntN(3))*1e6).In(zones[rng.IntN(len(zones))])
				r.FetchedAt = &f
			}
			recs[i] = r
			lf := listedFile{FileID: r.FileID.String(), URI: r.URI(), Name: r.Filename, MimeType: r.Mimetype,
				Size: r.SizeBytes, CreatedAt: r.CreatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC()}
			if r.SHA256 != nil {
				h := hex.EncodeToString(r.SHA256)
				lf.SHA256 = &h
			}
			if r.FetchedAt != nil {
				f := r.FetchedAt.UTC()
				lf.FetchedAt = &f
			}
			want.Uploads[i] = lf
		}
		if round%3 == 0 {
			want.NextCursor = pendinguploads.Cursor{CreatedAt: time.Now(), FileID: uuid.New()}.Encode()
		}
		wantJSON, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendList(nil, recs, want.NextCursor); !bytes.Equal(got, wantJSON) {
			t.Fatalf("round %d:\ngot  %s\nwant %s", round, got, wantJSON)
		}
	}
}
