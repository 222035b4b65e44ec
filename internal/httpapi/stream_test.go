package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// TestContentRange: one range of bytes is 206 with exactly those bytes and
// its Content-Range; a range past the end is 416 with bytes */size;
// anything else Range may say (several ranges, another unit, garbage) is
// ignored: 200 with the whole file. Inline small, inline over a chunk and
// bucket-held files alike.
func TestContentRange(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{
		"INLINE_MAX_BYTES": strconv.Itoa(3 << 20), "MAX_REQUEST_BYTES": strconv.Itoa(8 << 20)}})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	files := map[string][]byte{
		"small":       randomBytes(1000),
		"inlineLarge": randomBytes(2*pendinguploads.ChunkBytes + 77),
		"bucket":      randomBytes(3<<20 + 5),
	}
	for name, data := range files {
		t.Run(name, func(t *testing.T) {
			f := uploadParts(t, srv, ws.String(), tok, file(name+".bin", "application/octet-stream", string(data)))[0]
			size := int64(len(data))
			u := contentURL(srv, ws.String(), f.FileID)
			for _, tt := range []struct {
				rng        string
				off, n     int64
				status     int
				wantHeader string
			}{
				{"bytes=0-0", 0, 1, 206, fmt.Sprintf("bytes 0-0/%d", size)},
				{"bytes=2-5", 2, 4, 206, fmt.Sprintf("bytes 2-5/%d", size)},
				{"bytes=10-", 10, size - 10, 206, fmt.Sprintf("bytes 10-%d/%d", size-1, size)},
				{"bytes=-3", size - 3, 3, 206, fmt.Sprintf("bytes %d-%d/%d", size-3, size-1, size)},
				{fmt.Sprintf("bytes=%d-%d", size-2, size+100), size - 2, 2, 206, fmt.Sprintf("bytes %d-%d/%d", size-2, size-1, size)},
				{fmt.Sprintf("bytes=%d-", size), 0, 0, 416, fmt.Sprintf("bytes */%d", size)},
				{"bytes=-0", 0, 0, 416, fmt.Sprintf("bytes */%d", size)},
				{"bytes=0-1,4-5", 0, size, 200, ""},
				{"items=0-1", 0, size, 200, ""},
				{"bytes=5-2", 0, size, 200, ""},
				{"bytes=x-", 0, size, 200, ""},
			} {
				req := newRequest(t, "GET", u, tok, "", nil)
				req.Header.Set("Range", tt.rng)
				res := send(t, req)
				if res.status != tt.status || res.header.Get("Content-Range") != tt.wantHeader {
					t.Fatalf("Range %q: got %d %q, want %d %q; body %.100q", tt.rng, res.status, res.header.Get("Content-Range"), tt.status, tt.wantHeader, res.body)
				}
				if tt.status == 416 {
					if ct := res.header.Get("Content-Type"); ct != "application/json" {
						t.Errorf("Range %q: 416 Content-Type %q, want JSON", tt.rng, ct)
					}
					continue
				}
				if !bytes.Equal(res.body, data[tt.off:tt.off+tt.n]) || res.header.Get("Content-Length") != strconv.FormatInt(tt.n, 10) {
					t.Errorf("Range %q: got %d bytes (Content-Length %s), want bytes %d..%d", tt.rng, len(res.body), res.header.Get("Content-Length"), tt.off, tt.off+tt.n)
				}
				sum := sha256.Sum256(data)
				whole := "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
				if d := res.header.Get("Repr-Digest"); d != whole {
					t.Errorf("Range %q: Repr-Digest %q, want the whole file's", tt.rng, d)
				}
				if d, ok := res.header["Content-Digest"]; (tt.status == 200) != ok || (ok && d[0] != whole) {
					t.Errorf("Range %q: %d with Content-Digest %q, want the whole file's on a 200 and none on a 206", tt.rng, tt.status, d)
				}
				if res.header.Get("Accept-Ranges") != "bytes" {
					t.Errorf("Range %q: Accept-Ranges %q", tt.rng, res.header.Get("Accept-Ranges"))
				}
			}
		})
	}
	t.Run("QueryOtherThanRedirect", func(t *testing.T) {
		f := stage(t, srv, ws, "q.txt", "", "q")
		for q, msg := range map[string]string{
			"?redirect=0":            "invalid query parameter (only redirect=1)",
			"?redirect=1&redirect=1": "invalid query parameter (only redirect=1)",
			"?x=1":                   "invalid query parameter (only redirect=1)",
			"?redirect=%zz":          "invalid query string",
			"?redirect=1;x":          "invalid query string",
		} {
			wantError(t, get(t, contentURL(srv, ws.String(), f.FileID)+q, tok), http.StatusBadRequest, msg, nil)
		}
		// An inline file asked with redirect=1 is still served.
		res := get(t, contentURL(srv, ws.String(), f.FileID)+"?redirect=1", tok)
		if res.status != 200 || string(res.body) != "q" {
			t.Fatalf("inline with redirect=1: got %d %q", res.status, res.body)
		}
	})
}

// TestContentRacesAckAndSweep runs, for real and under -race, many
// fetches of the same files while they are acked and swept (retention 0).
// Every answer is either a 200 whose bytes are exactly Content-Length long
// and hash to its Content-Digest, a 206 (half the fetchers ask for one
// Range) with exactly that stretch of the file, or a 404: never a short,
// empty or other file. Inline (one statement, and chunked) and bucket
// files alike.
func TestContentRacesAckAndSweep(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{
		"INLINE_MAX_BYTES": strconv.Itoa(2 << 20), "MAX_REQUEST_BYTES": strconv.Itoa(8 << 20)}})
	ctx := context.Background()
	sizes := []int{3000, pendinguploads.ChunkBytes + 1000, 2<<20 + 1000}
	const rounds, fetchers = 6, 8
	var ok200, ok404 int
	var mu sync.Mutex
	for round := range rounds {
		ws := uuid.New()
		tok := srv.WorkspaceToken(t, ws)
		var staged []stagedFile
		data := map[string][]byte{}
		for i, n := range sizes {
			b := randomBytes(n)
			f := uploadParts(t, srv, ws.String(), tok, file(fmt.Sprintf("f%d-%d.bin", round, i), "", string(b)))[0]
			staged = append(staged, f)
			data[f.FileID] = b
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, f := range staged {
			for k := range fetchers {
				wg.Go(func() {
					<-start
					var want []byte // a range: the stretch it must answer
					if k%2 == 1 {
						b := data[f.FileID]
						want = b[len(b)/4 : len(b)/4+len(b)/2]
					}
					status, err := fetchChecked(ctx, contentURL(srv, ws.String(), f.FileID), tok, len(data[f.FileID])/4, want)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err != nil:
						t.Errorf("file %s: %v", f.FileID, err)
					case status == 200 && want == nil, status == 206 && want != nil:
						ok200++
					case status == 404:
						ok404++
					default:
						t.Errorf("file %s: status %d", f.FileID, status)
					}
				})
			}
			wg.Go(func() {
				<-start
				time.Sleep(time.Millisecond)
				res := post(t, ackURL(srv, ws.String(), f.FileID), tok, "", nil)
				if res.status != 200 {
					t.Errorf("ack: %d %s", res.status, res.body)
				}
			})
		}
		wg.Go(func() {
			<-start
			for range 20 {
				if _, err := srv.Store.Sweep(ctx, 0); err != nil {
					t.Errorf("sweep: %v", err)
				}
				time.Sleep(time.Millisecond)
			}
		})
		close(start)
		wg.Wait()
	}
	t.Logf("%d answers 200 with the whole file or 206 with the range, %d answers 404", ok200, ok404)
	if ok200 == 0 {
		t.Fatal("no fetch won the race: the test proves nothing")
	}
}

// fetchChecked GETs u and checks a 200's bytes against its headers. With
// want set it asks for the range of len(want) bytes from off, and checks a
// 206 is exactly want.
func fetchChecked(ctx context.Context, u, tok string, off int, want []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if want != nil {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+len(want)-1))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("status %d, body cut after %d bytes: %w", resp.StatusCode, len(body), err)
	}
	if resp.StatusCode == 206 && want != nil {
		if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) || !bytes.Equal(body, want) {
			return 206, fmt.Errorf("206 with %d bytes (Content-Length %s), not the %d asked for", len(body), cl, len(want))
		}
		return 206, nil
	}
	if resp.StatusCode != 200 {
		return resp.StatusCode, nil
	}
	if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) || len(body) == 0 {
		return 200, fmt.Errorf("200 with %d bytes, Content-Length %s", len(body), cl)
	}
	sum := sha256.Sum256(body)
	if d := resp.Header.Get("Content-Digest"); d != "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":" {
		return 200, fmt.Errorf("200 whose %d bytes do not match Content-Digest %s", len(body), d)
	}
	return 200, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
