package functions_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// peakRSSLimit is what the content function may hold at its high-water
// mark while it streams the largest file: the answer goes out a chunk at
// a time, so the file's size must not show.
const peakRSSLimit = 64 << 20

// TestContentStreamsLargeFiles runs the content function as Lambda does
// (the real bootstrap, the Runtime API) over Postgres and moto: a 25 MiB
// bucket-held file and a 4 MiB inline file each come back as a streamed
// 200, byte-exact, with API.md's headers; one Range is a 206 with exactly
// those bytes; ?redirect=1 is a 307 to a presigned GET for the bucket
// file and a plain 200 for the inline one. The function's peak resident
// set (VmHWM) after it streamed each file stays under peakRSSLimit:
//
//	go test ./functions -run TestContentStreamsLargeFiles -v
func TestContentStreamsLargeFiles(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.MustURL(t)
	ep := s3test.MustStart(t)
	s3c, bucket := s3test.NewBucket(t, ep)
	pool := openPool(t, dbURL)
	store := pendinguploads.New(pool, s3blobs.NewFromClient(s3c, bucket), apptest.StoreSettings())
	store.InlineMaxBytes = 5 << 20
	ws := uuid.MustParse(workspacePlaceholder)
	ctx := context.Background()
	files := []struct {
		name   string
		data   []byte
		bucket bool
	}{
		{"inline.bin", randomFile(4 << 20), false},
		{"big.bin", randomFile(25 << 20), true},
	}
	ids := make([]string, len(files))
	for i, f := range files {
		recs, err := store.Stage(ctx, auth.AdminIdentity(), ws, []pendinguploads.File{{Content: f.data, Filename: f.name, Mimetype: "application/octet-stream"}})
		if err != nil {
			t.Fatalf("stage %s: %v", f.name, err)
		}
		rec := recs[0]
		if rec.InBucket() != f.bucket {
			t.Fatalf("stage %s: in the bucket %v, want %v", f.name, rec.InBucket(), f.bucket)
		}
		ids[i] = rec.FileID.String()
	}
	env := append(dbEnv(dbURL), ep.Env()...)
	env = append(env, "CONTENT_BUCKET="+bucket)

	for i, f := range files {
		t.Run(f.name, func(t *testing.T) {
			rt := start(t, "content", env...)
			size := len(f.data)
			sum := sha256.Sum256(f.data)
			event := withFileID(readEvent(t, "content"), ids[i])

			resp := invokeHTTP(t, rt, event)
			if resp.StatusCode != 200 || !resp.Streamed || resp.IsBase64Encoded {
				t.Fatalf("content: status %d, streamed %v, base64 %v; want a streamed 200 of the bytes as they are",
					resp.StatusCode, resp.Streamed, resp.IsBase64Encoded)
			}
			if !bytes.Equal([]byte(resp.Body), f.data) {
				t.Fatalf("content: %d bytes, want the %d bytes of %s", len(resp.Body), size, f.name)
			}
			wantHeaders(t, resp, map[string]string{
				"Content-Type":           "application/octet-stream",
				"Content-Length":         strconv.Itoa(size),
				"Content-Disposition":    `attachment; filename="` + f.name + `"; filename*=UTF-8''` + f.name,
				"Content-Digest":         "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":",
				"Repr-Digest":            "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":",
				"X-Content-Type-Options": "nosniff",
				"Cache-Control":          "private, no-store",
				"Accept-Ranges":          "bytes",
				"Content-Range":          "",
			})
			if hwm := vm(t, rt, "VmHWM"); hwm > peakRSSLimit {
				t.Errorf("content of %d MiB: peak RSS %d MiB, want under %d MiB", size>>20, hwm>>20, peakRSSLimit>>20)
			} else {
				t.Logf("content of %s (%d MiB): peak RSS (VmHWM) %.1f MiB", f.name, size>>20, float64(hwm)/(1<<20))
			}

			// One range: a middle stretch that crosses chunk boundaries.
			off, n := size/3, size/2+11
			resp = invokeHTTP(t, rt, editEvent(t, event, func(ev *events.APIGatewayProxyRequest) {
				setHeader(ev, "Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
			}))
			if resp.StatusCode != 206 || !bytes.Equal([]byte(resp.Body), f.data[off:off+n]) {
				t.Fatalf("range: status %d, %d bytes; want 206 with bytes %d-%d", resp.StatusCode, len(resp.Body), off, off+n-1)
			}
			wantHeaders(t, resp, map[string]string{
				"Content-Length": strconv.Itoa(n),
				"Content-Range":  fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, size),
				"Repr-Digest":    "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":",
				"Content-Digest": "", // RFC 9530: the range's, known only after its bytes: none
				"Accept-Ranges":  "bytes",
			})

			// ?redirect=1: the bucket file goes to S3, the inline one is a 200.
			resp = invokeHTTP(t, rt, editEvent(t, event, func(ev *events.APIGatewayProxyRequest) {
				ev.QueryStringParameters = map[string]string{"redirect": "1"}
				ev.MultiValueQueryStringParameters = map[string][]string{"redirect": {"1"}}
			}))
			if !f.bucket {
				if resp.StatusCode != 200 || !bytes.Equal([]byte(resp.Body), f.data) {
					t.Fatalf("redirect=1 of an inline file: status %d, %d bytes; want 200 with the file", resp.StatusCode, len(resp.Body))
				}
				return
			}
			loc, err := url.Parse(header(resp, "Location"))
			if resp.StatusCode != 307 || err != nil || !strings.HasPrefix(loc.String(), ep.URL+"/"+bucket+"/") ||
				loc.Query().Get("X-Amz-Signature") == "" || loc.Query().Get("X-Amz-Expires") != "300" {
				t.Fatalf("redirect=1: status %d, Location %q; want 307 to a presigned GET of the bucket valid 300 s", resp.StatusCode, loc)
			}
			if cd := loc.Query().Get("response-content-disposition"); !strings.Contains(cd, f.name) {
				t.Errorf("redirect=1: response-content-disposition %q, want the file's", cd)
			}
		})
	}
}

// randomFile returns n random bytes.
func randomFile(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// editEvent returns event as fn changes it.
func editEvent(t testing.TB, event []byte, fn func(*events.APIGatewayProxyRequest)) []byte {
	t.Helper()
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(event, &ev); err != nil {
		t.Fatal(err)
	}
	fn(&ev)
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// setHeader sets a request header in both of the event's header maps.
func setHeader(ev *events.APIGatewayProxyRequest, name, value string) {
	if ev.Headers == nil {
		ev.Headers = map[string]string{}
	}
	if ev.MultiValueHeaders == nil {
		ev.MultiValueHeaders = map[string][]string{}
	}
	ev.Headers[name] = value
	ev.MultiValueHeaders[name] = []string{value}
}

// wantHeaders checks the response's headers; "" means absent.
func wantHeaders(t testing.TB, resp httpResponse, want map[string]string) {
	t.Helper()
	for name, value := range want {
		if got := header(resp, name); got != value {
			t.Errorf("%s: got %q, want %q", name, got, value)
		}
	}
}

// TestContentAbortsCutStream: when the bucket's answer breaks after the
// content function has sent its status line (here a proxy in front of
// moto cuts every large GET after 1 MiB), the real bootstrap ends its
// streamed response with an error (Lambda's error trailers: a failed
// invocation, which API Gateway turns into a cut transfer), never a
// complete-looking 200 with fewer bytes than its Content-Length.
func TestContentAbortsCutStream(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.MustURL(t)
	ep := s3test.MustStart(t)
	s3c, bucket := s3test.NewBucket(t, ep)
	pool := openPool(t, dbURL)
	store := pendinguploads.New(pool, s3blobs.NewFromClient(s3c, bucket), apptest.StoreSettings())
	data := randomFile(8 << 20)
	recs, err := store.Stage(context.Background(), auth.AdminIdentity(), uuid.MustParse(workspacePlaceholder),
		[]pendinguploads.File{{Content: data, Filename: "cut.bin", Mimetype: "application/octet-stream"}})
	if err != nil || !recs[0].InBucket() {
		t.Fatalf("stage: %v (in the bucket: %v)", err, err == nil && recs[0].InBucket())
	}
	rec := recs[0]

	target, _ := url.Parse(ep.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method == "GET" && resp.ContentLength > 2<<20 {
			resp.Body = &cutReader{r: resp.Body, left: 1 << 20}
		}
		return nil
	}
	rp.ErrorLog = log.New(io.Discard, "", 0)
	cutter := httptest.NewServer(rp)
	t.Cleanup(cutter.Close)

	env := append(dbEnv(dbURL), s3test.Endpoint{URL: cutter.URL}.Env()...)
	env = append(env, "CONTENT_BUCKET="+bucket)
	rt := start(t, "content", env...)
	ctx, cancel := context.WithTimeout(context.Background(), invokeTimeout)
	defer cancel()
	res, err := rt.Invoke(ctx, withFileID(readEvent(t, "content"), rec.FileID.String()))
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if res.Err == nil {
		body := res.Payload
		if res.Streamed {
			_, body, _ = lambdatest.SplitStreamed(res.Payload)
		}
		t.Fatalf("a cut transfer answered without error: streamed %v, %d body bytes of %d", res.Streamed, len(body), len(data))
	}
	if !res.Streamed {
		t.Errorf("the error came without a streamed answer: %+v", res.Err)
	}
	t.Logf("function error %s: %s", res.Err.Type, res.Err.Message)
}

// cutReader yields left bytes of r, then an error.
type cutReader struct {
	r    io.ReadCloser
	left int
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errors.New("cut")
	}
	n, err := c.r.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, err
}

func (c *cutReader) Close() error { return c.r.Close() }
