package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/clienttest/clientkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func hexSum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestUploadListDownloadAck(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	admin := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	wsc := clientkit.MustClient(t, srv.URL, srv.WorkspaceToken(t, ws))
	ctx := clientkit.Ctx(t)
	a, b := clientkit.RandomBytes(1000, 1), []byte("hello\n")
	staged, err := admin.Upload(ctx, ws, []client.UploadFile{
		client.BytesFile("a b.bin", "application/x-thing", a),
		client.BytesFile(`we"ird\name.txt`, "text/plain", b),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(staged) != 2 || staged[0].Name != "a_b.bin" || staged[1].Name != "we_ird_name.txt" ||
		staged[0].SHA256 != hexSum(a) || staged[1].Size != int64(len(b)) {
		t.Fatalf("staged: got %+v", staged)
	}
	files, err := wsc.List(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("list: got %+v", files)
	}
	// One request's files share created_at: the list orders them by ID.
	if files[0].FileID != staged[0].FileID {
		files[0], files[1] = files[1], files[0]
	}
	if files[0].FileID != staged[0].FileID || files[0].MimeType != "application/x-thing" {
		t.Fatalf("list: got %+v", files)
	}
	for i, want := range [][]byte{a, b} {
		var buf bytes.Buffer
		if _, err := wsc.Download(ctx, ws, files[i], &buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("download %d: bytes differ", i)
		}
		ct, err := wsc.Fetch(ctx, ws, files[i].FileID)
		if err != nil {
			t.Fatal(err)
		}
		ct.Body.Close()
		if ct.Digest == nil || ct.Filename != files[i].Name {
			t.Fatalf("fetch: got digest %x, filename %q", ct.Digest, ct.Filename)
		}
		r, err := wsc.Ack(ctx, ws, files[i].FileID)
		if err != nil || !r.Acked {
			t.Fatalf("ack: got %+v, %v", r, err)
		}
		if _, err := wsc.Ack(ctx, ws, files[i].FileID); err != nil {
			t.Fatalf("re-ack: got %v, want success", err)
		}
	}
	files, err = wsc.List(ctx, ws)
	if err != nil || len(files) != 0 {
		t.Fatalf("list after ack: got %v, %v; want empty", files, err)
	}
}

func TestListAllPages(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	c := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	ctx := clientkit.Ctx(t)
	var files []client.UploadFile
	for i := range 130 {
		files = append(files, client.BytesFile(fmt.Sprintf("f%03d.txt", i), "text/plain", []byte{byte(i)}))
	}
	staged, err := c.Upload(ctx, ws, files) // 64 files a request at most: 3 requests
	if err != nil {
		t.Fatal(err)
	}
	if len(staged) != 130 {
		t.Fatalf("staged: got %d, want 130", len(staged))
	}
	got, err := c.List(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uuid.UUID]bool{}
	for _, f := range got {
		seen[f.FileID] = true
	}
	if len(got) != 130 || len(seen) != 130 {
		t.Fatalf("list: got %d files, %d distinct; want 130", len(got), len(seen))
	}
	p, err := c.ListPage(ctx, ws, 7, "")
	if err != nil || len(p.Uploads) != 7 || p.NextCursor == "" {
		t.Fatalf("page: got %d uploads, cursor %q, %v", len(p.Uploads), p.NextCursor, err)
	}
}

func TestUploadSizeRules(t *testing.T) {
	t.Run("LearnsRequestCapFrom413", func(t *testing.T) {
		srv := apptest.NewServer(t, apptest.Options{Env: map[string]string{"MAX_REQUEST_BYTES": "1048576"}})
		ws := uuid.New()
		c := clientkit.MustClient(t, srv.URL, srv.AdminToken)
		files := []client.UploadFile{
			client.BytesFile("a.bin", "", clientkit.RandomBytes(600<<10, 1)),
			client.BytesFile("b.bin", "", clientkit.RandomBytes(600<<10, 2)),
			client.BytesFile("c.bin", "", clientkit.RandomBytes(600<<10, 3)),
		}
		staged, err := c.Upload(clientkit.Ctx(t), ws, files)
		if err != nil {
			t.Fatal(err)
		}
		if len(staged) != 3 || staged[0].Name != "a.bin" || staged[2].Name != "c.bin" {
			t.Fatalf("got %+v", staged)
		}
	})
	t.Run("ErrTooLargeWithoutPresign", func(t *testing.T) {
		srv := apptest.NewServer(t, apptest.Options{})
		ws := uuid.New()
		c := clientkit.MustClient(t, srv.URL, srv.AdminToken)
		c.MaxRequestBytes = 64 << 20 // believe a raised cap: the 413 corrects it
		staged, err := c.Upload(clientkit.Ctx(t), ws, []client.UploadFile{client.BytesFile("big.bin", "", clientkit.RandomBytes(5<<20, 4))})
		if !errors.Is(err, client.ErrTooLarge) || len(staged) != 0 {
			t.Fatalf("got %v, %v; want ErrTooLarge", staged, err)
		}
		if !strings.Contains(err.Error(), "4.0 MiB") || !strings.Contains(err.Error(), "no presigned uploads") {
			t.Fatalf("message: got %q", err)
		}
		// The server's max, a whole number of bytes (it read 4.194304e+06).
		if !strings.Contains(err.Error(), "(max 4194304 bytes, 4.0 MiB)") || strings.Contains(err.Error(), "e+06") {
			t.Errorf("message: got %q, want the 413's max as (max 4194304 bytes, 4.0 MiB)", err)
		}
		if files, _ := c.List(clientkit.Ctx(t), ws); len(files) != 0 {
			t.Fatalf("list: got %d files, want none", len(files))
		}
	})
	t.Run("MultipartWhenCapRaised", func(t *testing.T) {
		srv := apptest.NewServer(t, apptest.Options{Env: map[string]string{"MAX_REQUEST_BYTES": "33554432"}})
		ws := uuid.New()
		c := clientkit.MustClient(t, srv.URL, srv.AdminToken)
		big := clientkit.RandomBytes(20<<20, 5)
		staged, err := c.Upload(clientkit.Ctx(t), ws, []client.UploadFile{client.BytesFile("big.bin", "", big)})
		if err != nil || len(staged) != 1 || staged[0].SHA256 != hexSum(big) {
			t.Fatalf("got %+v, %v", staged, err)
		}
	})
	t.Run("RefusedBeforeSending", func(t *testing.T) {
		c := clientkit.MustClient(t, "http://127.0.0.1:1", "tok")
		for _, f := range []client.UploadFile{client.BytesFile("empty", "", nil), {Name: "huge", Size: client.MaxFileBytes + 1, Open: func() (io.ReadCloser, error) { return nil, nil }}} {
			if _, err := c.Upload(clientkit.Ctx(t), uuid.New(), []client.UploadFile{f}); err == nil || client.IsUnavailable(err) {
				t.Fatalf("%s: got %v, want a refusal without a request", f.Name, err)
			}
		}
	})
}

// TestUploadPresignedS3 needs the server's presign route (API.md form B).
func TestUploadPresignedS3(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{S3: true})
	ws := uuid.New()
	c := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	big := clientkit.RandomBytes(6<<20, 6)
	staged, err := c.UploadPresigned(clientkit.Ctx(t), ws, []client.UploadFile{client.BytesFile("big.bin", "application/octet-stream", big)})
	if err != nil {
		t.Fatalf("presigned upload: %v", err)
	}
	if len(staged) != 1 || staged[0].SHA256 != hexSum(big) || staged[0].Size != int64(len(big)) {
		t.Fatalf("got %+v", staged)
	}
	var buf bytes.Buffer
	f := client.File{FileID: staged[0].FileID, Size: staged[0].Size, SHA256: staged[0].SHA256}
	if _, err := c.Download(clientkit.Ctx(t), ws, f, &buf); err != nil || !bytes.Equal(buf.Bytes(), big) {
		t.Fatalf("download: %v", err)
	}
}

func TestPresignNotOffered(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	c := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	_, err := c.Presign(clientkit.Ctx(t), uuid.New(), []client.UploadFile{client.BytesFile("a", "", []byte("x"))})
	if !errors.Is(err, client.ErrPresignNotOffered) {
		t.Fatalf("got %v, want ErrPresignNotOffered", err)
	}
}

// TestFetchRedirectS3: Fetch asks for redirect=1, so a file held in the
// bucket is served by a 307 to moto; the client follows it and verifies
// the bytes.
func TestFetchRedirectS3(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"MAX_REQUEST_BYTES": "33554432"}})
	ws := uuid.New()
	c := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	ctx := clientkit.Ctx(t)
	big := clientkit.RandomBytes(5<<20, 7)
	if _, err := c.Upload(ctx, ws, []client.UploadFile{client.BytesFile("big.bin", "", big)}); err != nil {
		t.Fatal(err)
	}
	files, err := c.List(ctx, ws)
	if err != nil || len(files) != 1 {
		t.Fatalf("list: %v, %v", files, err)
	}
	ct, err := c.Fetch(ctx, ws, files[0].FileID)
	if err != nil {
		t.Fatal(err)
	}
	ct.Body.Close()
	if !ct.Redirected {
		t.Fatalf("fetch: not redirected; want a 307 to the bucket")
	}
	var buf bytes.Buffer
	if _, err := c.Download(ctx, ws, files[0], &buf); err != nil || !bytes.Equal(buf.Bytes(), big) {
		t.Fatalf("download: %v", err)
	}
}

// TestRedirectDropsAuthorization uses stand-ins for the API and the bucket
// to see the headers the bucket receives.
func TestRedirectDropsAuthorization(t *testing.T) {
	var bucketAuth atomic.Value
	bucket := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bucketAuth.Store(r.Header.Get("Authorization") + "|")
		w.Write([]byte("bytes"))
	}))
	defer bucket.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret-token" {
			w.WriteHeader(401)
			return
		}
		http.Redirect(w, r, bucket.URL+"/obj?X-Amz-Signature=abc", http.StatusTemporaryRedirect)
	}))
	defer api.Close()
	c := clientkit.MustClient(t, api.URL, "secret-token")
	ct, err := c.Fetch(clientkit.Ctx(t), uuid.New(), uuid.New())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(ct.Body)
	ct.Body.Close()
	if string(body) != "bytes" || !ct.Redirected {
		t.Fatalf("got %q, redirected %v", body, ct.Redirected)
	}
	if got := bucketAuth.Load(); got != "|" {
		t.Fatalf("bucket saw Authorization %q, want none", got)
	}
}

func TestTypedErrors(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws, other := uuid.New(), uuid.New()
	tok := srv.WorkspaceToken(t, other)
	c := clientkit.MustClient(t, srv.URL, tok)
	ctx := clientkit.Ctx(t)
	t.Run("Unauthorized", func(t *testing.T) {
		_, err := c.List(ctx, ws)
		var ae *client.APIError
		if !client.IsUnauthorized(err) || !errors.As(err, &ae) || ae.Code != wire.CodeInvalidToken || ae.Message != "invalid workspace auth token" {
			t.Fatalf("got %v (code %q), want 401 invalid_token", err, client.ErrorCode(err))
		}
		if strings.Contains(err.Error(), tok) {
			t.Fatalf("error carries the token: %q", err)
		}
	})
	t.Run("NotFound", func(t *testing.T) {
		_, err := c.Ack(ctx, other, uuid.New())
		if !client.IsNotFound(err) || client.ErrorCode(err) != wire.CodeFileNotFound {
			t.Fatalf("got %v (code %q), want 404 file_not_found", err, client.ErrorCode(err))
		}
		_, err = c.Fetch(ctx, other, uuid.New())
		if !client.IsNotFound(err) || client.ErrorCode(err) != wire.CodeFileNotFound {
			t.Fatalf("got %v (code %q), want 404 file_not_found", err, client.ErrorCode(err))
		}
	})
	t.Run("Fields", func(t *testing.T) {
		admin := clientkit.MustClient(t, srv.URL, srv.AdminToken)
		_, err := admin.UploadMultipart(ctx, ws, []client.UploadFile{client.BytesFile("x.bin", "", nil)})
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != wire.CodeEmptyFile || ae.Fields["filename"] != "x.bin" {
			t.Fatalf("got %#v", err)
		}
	})
}

func TestRetries(t *testing.T) {
	var calls atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if r.Method == "POST" || n < 3 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			w.Write([]byte(`{"error":"storage unavailable, retry shortly","code":"unavailable"}`))
			return
		}
		w.Write([]byte(`{"uploads":[]}`))
	}))
	defer flaky.Close()
	t.Run("ListRetriedOn503", func(t *testing.T) {
		calls.Store(0)
		c := clientkit.MustClient(t, flaky.URL, "tok")
		files, err := c.List(clientkit.Ctx(t), uuid.New())
		if err != nil || len(files) != 0 || calls.Load() != 3 {
			t.Fatalf("got %v, %v after %d calls; want success after 3", files, err, calls.Load())
		}
	})
	t.Run("UploadNotRetried", func(t *testing.T) {
		calls.Store(0)
		c := clientkit.MustClient(t, flaky.URL, "tok")
		_, err := c.Upload(clientkit.Ctx(t), uuid.New(), []client.UploadFile{client.BytesFile("a", "", []byte("x"))})
		var ae *client.APIError
		if !client.IsUnavailable(err) || !errors.As(err, &ae) || ae.Code != "unavailable" || calls.Load() != 1 {
			t.Fatalf("got %v after %d calls; want one 503", err, calls.Load())
		}
	})
	t.Run("AckRetriedThenGivesUp", func(t *testing.T) {
		calls.Store(0)
		c := clientkit.MustClient(t, flaky.URL, "tok")
		_, err := c.Ack(clientkit.Ctx(t), uuid.New(), uuid.New())
		if !client.IsUnavailable(err) || calls.Load() != 3 {
			t.Fatalf("got %v after %d calls; want 3 tries", err, calls.Load())
		}
	})
	t.Run("ContextBoundsBackoff", func(t *testing.T) {
		calls.Store(0)
		c := clientkit.MustClient(t, flaky.URL, "tok")
		c.Retry = client.RetryPolicy{MaxAttempts: 100, BaseDelay: time.Second, MaxDelay: time.Minute}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.Ack(ctx, uuid.New(), uuid.New())
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
			t.Fatalf("got %v after %v", err, time.Since(start))
		}
	})
	t.Run("ConnectionRefused", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		u := dead.URL
		dead.Close()
		c := clientkit.MustClient(t, u, "tok")
		_, err := c.List(clientkit.Ctx(t), uuid.New())
		var te *client.TransportError
		if !errors.As(err, &te) || !client.IsUnavailable(err) {
			t.Fatalf("got %v, want a TransportError", err)
		}
	})
}

// tamperProxy serves srv through a proxy that changes content answers:
// flip flips the body's first byte; header replaces Repr-Digest or Content-Digest.

func TestDownloadIntegrity(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	admin := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	ctx := clientkit.Ctx(t)
	data := clientkit.RandomBytes(5000, 8)
	if _, err := admin.Upload(ctx, ws, []client.UploadFile{client.BytesFile("d.bin", "", data)}); err != nil {
		t.Fatal(err)
	}
	files, err := admin.List(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	for name, proxy := range map[string]string{
		"FlippedByte":               apptest.TamperProxy(t, srv.URL, true, nil),
		"AlteredHeader":             apptest.TamperProxy(t, srv.URL, false, map[string]string{"Repr-Digest": "sha-256=:" + strings.Repeat("A", 43) + "=:"}),
		"OlderServersAlteredHeader": apptest.TamperProxy(t, srv.URL, false, map[string]string{"Repr-Digest": "", "Content-Digest": "sha-256=:" + strings.Repeat("A", 43) + "=:"}),
	} {
		t.Run(name, func(t *testing.T) {
			c := clientkit.MustClient(t, proxy, srv.AdminToken)
			_, err := c.Download(ctx, ws, files[0], io.Discard)
			if !errors.Is(err, client.ErrIntegrity) {
				t.Fatalf("got %v, want ErrIntegrity", err)
			}
		})
	}
	t.Run("WrongListSize", func(t *testing.T) {
		f := files[0]
		f.Size++
		if _, err := admin.Download(ctx, ws, f, io.Discard); !errors.Is(err, client.ErrIntegrity) {
			t.Fatalf("got %v, want ErrIntegrity", err)
		}
	})
}

// TestResumeVerifiesTheWholeFile: a resumed download (Range, 206) is
// verified as the whole file through the answer's Repr-Digest (inline;
// from the bucket, through the redirect, the bucket's 206 carries none
// and the list's sha256 stands): a Repr-Digest altered on the 206 is an
// integrity error; a 206 whose Content-Digest is its range's (RFC 9530)
// or, from a server before Repr-Digest, the whole file's, resumes fine;
// a 200 from such a server is checked against its Content-Digest.
func TestResumeVerifiesTheWholeFile(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"INLINE_MAX_BYTES": "100000"}})
	ws := uuid.New()
	admin := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	ctx := clientkit.Ctx(t)
	const have = 3000
	inline, inBucket := clientkit.RandomBytes(50000, 21), clientkit.RandomBytes(200000, 22)
	if _, err := admin.Upload(ctx, ws, []client.UploadFile{client.BytesFile("inline.bin", "", inline), client.BytesFile("bucket.bin", "", inBucket)}); err != nil {
		t.Fatal(err)
	}
	files, err := admin.List(ctx, ws)
	if err != nil || len(files) != 2 {
		t.Fatalf("list: %d files, %v", len(files), err)
	}
	digest := func(b []byte) string {
		sum := sha256.Sum256(b)
		return "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
	}
	wrong := "sha-256=:" + strings.Repeat("A", 43) + "=:"
	resume := func(t *testing.T, proxy string, f client.File, data []byte, noList bool) error {
		t.Helper()
		if noList {
			f.SHA256 = "" // only the answer's digest can tell
		}
		h := sha256.New()
		h.Write(data[:have])
		var w bytes.Buffer
		w.Write(data[:have])
		_, err := clientkit.MustClient(t, proxy, srv.AdminToken).Resume(ctx, ws, f, have, h, &w, func() error { w.Reset(); return nil })
		if err == nil && !bytes.Equal(w.Bytes(), data) {
			t.Fatalf("resumed: %d bytes, not the file's", w.Len())
		}
		return err
	}
	var inlineFile client.File
	for _, f := range files {
		data := inline
		if f.Name == "bucket.bin" {
			data = inBucket
		} else {
			inlineFile = f
		}
		t.Run(f.Name, func(t *testing.T) {
			for _, tc := range []struct {
				name   string
				header map[string]string
				noList bool
				ok     bool
			}{
				{"AsServed", nil, false, true},
				{"AsServedWithoutTheList", nil, true, true},
				{"ContentDigestOfTheRange", map[string]string{"Content-Digest": digest(data[have:])}, true, true},
				{"OlderServersContentDigestOfTheWholeFile", map[string]string{"Repr-Digest": "", "Content-Digest": digest(data)}, true, true},
				{"ReprDigestAltered", map[string]string{"Repr-Digest": wrong}, false, false},
				{"ReprDigestAlteredWithoutTheList", map[string]string{"Repr-Digest": wrong}, true, false},
			} {
				if f.Name == "bucket.bin" && tc.header != nil {
					// The bytes come from the bucket's own 206, after the
					// API's 307: no header of ours to alter; the list's
					// sha256 checks them (AsServed).
					continue
				}
				t.Run(tc.name, func(t *testing.T) {
					err := resume(t, apptest.TamperProxy(t, srv.URL, false, tc.header), f, data, tc.noList)
					if tc.ok && err != nil {
						t.Fatalf("got %v, want the file", err)
					}
					var ie *client.IntegrityError
					if !tc.ok && (!errors.As(err, &ie) || ie.What != "repr-digest") {
						t.Fatalf("got %v, want a repr-digest integrity error", err)
					}
				})
			}
		})
	}
	t.Run("OlderServersAlteredContentDigestOn200", func(t *testing.T) {
		f := inlineFile
		f.SHA256 = ""
		proxy := apptest.TamperProxy(t, srv.URL, false, map[string]string{"Repr-Digest": "", "Content-Digest": wrong})
		_, err := clientkit.MustClient(t, proxy, srv.AdminToken).Download(ctx, ws, f, io.Discard)
		var ie *client.IntegrityError
		if !errors.As(err, &ie) || ie.What != "repr-digest" {
			t.Fatalf("got %v, want a repr-digest integrity error", err)
		}
	})
}

func TestParseContentDigest(t *testing.T) {
	sum := sha256.Sum256([]byte("x"))
	good := "sha-256=:" + "LXHg1J9tA1ibhcqqIuxmb1V2QWgelHvkn+MPn2VWMnM=" + ":"
	_ = sum
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{good, true},
		{"sha-512=:AAAA:, " + good, true},
		{"sha-256=AAAA", false},
		{"sha-256=:AAAA:", false},
		{"md5=:AAAA:", false},
	} {
		_, err := client.ParseContentDigest(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%q: got %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

// TestFileCapFromLimits: the client holds files to the per-file cap the
// server announces at GET /uploads/limits (a raised MAX_FILE_BYTES lets a
// 30 MiB file through), and to the default cap where the route is absent.
func TestFileCapFromLimits(t *testing.T) {
	huge := client.UploadFile{Name: "huge", Size: 30 << 20, Open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(clientkit.RandomBytes(30<<20, 9))), nil
	}}
	t.Run("Raised", func(t *testing.T) {
		srv := apptest.NewServer(t, apptest.Options{Env: map[string]string{"MAX_FILE_BYTES": "104857600", "MAX_REQUEST_BYTES": "67108864"}})
		c := clientkit.MustClient(t, srv.URL, srv.AdminToken)
		l, err := c.Limits(clientkit.Ctx(t))
		if err != nil || l.PerFileBytes != 104857600 || l.MaxAttachmentsPerMessage != 64 {
			t.Fatalf("limits: %+v, %v", l, err)
		}
		// No bucket: no parts (null, read as 0); the default quota.
		if l.Presign || l.MultipartThresholdBytes != 0 || l.MultipartPartBytes != 0 ||
			l.WorkspaceMaxPendingBytes != 5<<30 || l.WorkspaceMaxPendingFiles != 10000 {
			t.Fatalf("limits: %+v, want no presign, no parts, the default quota", l)
		}
		staged, err := c.Upload(clientkit.Ctx(t), uuid.New(), []client.UploadFile{huge})
		if err != nil || len(staged) != 1 || staged[0].Size != 30<<20 {
			t.Fatalf("30 MiB under a 100 MiB cap: %+v, %v", staged, err)
		}
	})
	t.Run("NoRoute", func(t *testing.T) {
		var posts atomic.Int32
		old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "POST" {
				posts.Add(1)
			}
			http.NotFound(w, r)
		}))
		defer old.Close()
		c := clientkit.MustClient(t, old.URL, "tok")
		if _, err := c.Upload(clientkit.Ctx(t), uuid.New(), []client.UploadFile{huge}); !errors.Is(err, client.ErrTooLarge) || posts.Load() != 0 {
			t.Fatalf("got %v after %d POSTs; want ErrTooLarge before any", err, posts.Load())
		}
	})
}

// TestQuotaExceeded: a refusal for the workspace's quota is its own
// error, with the quota's numbers, and never taken for a too-large file.
func TestQuotaExceeded(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{Env: map[string]string{"WORKSPACE_MAX_PENDING_FILES": "64"}})
	ws := uuid.New()
	c, err := client.New(srv.URL, srv.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	files := make([]client.UploadFile, 64)
	for i := range files {
		files[i] = client.BytesFile(fmt.Sprintf("f%d.txt", i), "text/plain", []byte("x"))
	}
	if _, err := c.Upload(clientkit.Ctx(t), ws, files); err != nil {
		t.Fatal(err)
	}
	_, err = c.Upload(clientkit.Ctx(t), ws, files[:1])
	var ae *client.APIError
	if !client.IsQuotaExceeded(err) || client.IsTooLarge(err) || !errors.As(err, &ae) {
		t.Fatalf("got %v, want a quota refusal", err)
	}
	if q, ok := ae.Quota(); !ok || q.Quota != "pending_files" || q.Limit != 64 || q.Pending != 64 || q.Adding != 1 {
		t.Fatalf("quota: %+v", q)
	}
}
