package functions_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/s3test"
)

// contentEvent is events/content.json for file id, with extra headers and
// query parameters.
func contentEvent(t testing.TB, id uuid.UUID, headers map[string]string, query map[string]string) []byte {
	t.Helper()
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(withFileID(readEvent(t, "content"), id.String()), &ev); err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		ev.Headers[k] = v
		ev.MultiValueHeaders[k] = []string{v}
	}
	if len(query) > 0 {
		ev.QueryStringParameters = map[string]string{}
		ev.MultiValueQueryStringParameters = map[string][]string{}
		for k, v := range query {
			ev.QueryStringParameters[k] = v
			ev.MultiValueQueryStringParameters[k] = []string{v}
		}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestContentStreams drives the real content bootstrap through the Runtime
// API: a 25 MiB file in the bucket and a 4 MiB inline file come back as
// streamed 200s (no 6 MB cap), byte-exact, with the contract's headers; a
// Range is a 206 of exactly those bytes; ?redirect=1 is a 307 for the
// bucket file. The process's peak RSS serving the 25 MiB file stays under
// 64 MiB: the file is streamed a chunk at a time, never held whole.
func TestContentStreams(t *testing.T) {
	t.Parallel()
	ep := s3test.MustStart(t)
	client, bucket := s3test.NewBucket(t, ep)
	url := pgtest.MustURL(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	inline := pendinguploads.New(pool)
	inBucket := pendinguploads.New(pool)
	inBucket.Blobs = s3blobs.NewFromClient(client, bucket)

	ws := uuid.New()
	big := make([]byte, 25<<20)
	rand.Read(big)
	four := make([]byte, 4<<20)
	rand.Read(four)
	ctx := context.Background()
	bigRec, err := inBucket.Put(ctx, ws, big, "big_video.mp4", "video/mp4")
	if err != nil || bigRec.S3Key == "" {
		t.Fatalf("put 25 MiB in the bucket: %+v, %v", bigRec, err)
	}
	fourRec, err := inline.Put(ctx, ws, four, "four.bin", "")
	if err != nil || fourRec.S3Key != "" {
		t.Fatalf("put 4 MiB inline: %+v, %v", fourRec, err)
	}
	// The events carry the placeholder workspace: move the rows there.
	if _, err := pool.Exec(ctx, `UPDATE pending_uploads SET workspace_id = $1 WHERE workspace_id = $2`, workspacePlaceholder, ws); err != nil {
		t.Fatal(err)
	}

	rt := start(t, "content", append(dbEnv(url), append(ep.Env(), "CONTENT_BUCKET="+bucket)...)...)
	for _, tt := range []struct {
		name  string
		rec   pendinguploads.Record
		data  []byte
		ctype string
	}{
		{"Bucket25MiB", bigRec, big, "video/mp4"},
		{"Inline4MiB", fourRec, four, "application/octet-stream"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := invokeHTTP(t, rt, contentEvent(t, tt.rec.FileID, nil, nil))
			if !resp.Streamed || resp.StatusCode != http.StatusOK {
				t.Fatalf("got status %d, streamed %v; want a streamed 200", resp.StatusCode, resp.Streamed)
			}
			if body := []byte(resp.Body); !bytes.Equal(body, tt.data) {
				t.Fatalf("body: got %d bytes, want the %d of the file", len(body), len(tt.data))
			}
			sum := sha256.Sum256(tt.data)
			name := tt.rec.Filename
			for k, v := range map[string]string{
				"Content-Type":           tt.ctype,
				"Content-Length":         strconv.Itoa(len(tt.data)),
				"Content-Disposition":    `attachment; filename="` + name + `"; filename*=UTF-8''` + name,
				"Content-Digest":         "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":",
				"X-Content-Type-Options": "nosniff",
				"Cache-Control":          "private, no-store",
				"Accept-Ranges":          "bytes",
			} {
				if got := header(resp, k); got != v {
					t.Errorf("%s: got %q, want %q", k, got, v)
				}
			}

			size := len(tt.data)
			ranged := invokeHTTP(t, rt, contentEvent(t, tt.rec.FileID, map[string]string{"Range": "bytes=1000-"}, nil))
			if ranged.StatusCode != http.StatusPartialContent || !bytes.Equal([]byte(ranged.Body), tt.data[1000:]) ||
				header(ranged, "Content-Range") != "bytes 1000-"+strconv.Itoa(size-1)+"/"+strconv.Itoa(size) {
				t.Errorf("Range bytes=1000-: got %d, %d bytes, Content-Range %q", ranged.StatusCode, len(ranged.Body), header(ranged, "Content-Range"))
			}
		})
	}
	if hwm := vm(t, rt, "VmHWM"); hwm >= 64<<20 {
		t.Errorf("peak RSS serving 25 MiB: %d bytes, want under 64 MiB", hwm)
	} else {
		t.Logf("peak RSS of the content function after serving 25 MiB and 4 MiB: %.1f MiB", float64(hwm)/(1<<20))
	}

	t.Run("Redirect", func(t *testing.T) {
		resp := invokeHTTP(t, rt, contentEvent(t, bigRec.FileID, nil, map[string]string{"redirect": "1"}))
		loc := header(resp, "Location")
		if resp.StatusCode != http.StatusTemporaryRedirect || !strings.Contains(loc, bucket) || !strings.Contains(loc, "X-Amz-Expires=300") {
			t.Fatalf("got %d, Location %q; want a 307 to a presigned GET of the bucket", resp.StatusCode, loc)
		}
	})
}
