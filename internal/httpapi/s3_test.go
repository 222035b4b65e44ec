package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/limits"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

type presignAnswer struct {
	Uploads []struct {
		UploadID  string            `json:"upload_id"`
		Method    string            `json:"method"`
		URL       string            `json:"url"`
		Headers   map[string]string `json:"headers"`
		ExpiresAt time.Time         `json:"expires_at"`
	} `json:"uploads"`
}

type stagedAnswer struct {
	Files []struct {
		FileID   string `json:"file_id"`
		URI      string `json:"uri"`
		Name     string `json:"name"`
		MimeType string `json:"mimeType"`
		Size     int64  `json:"size"`
		SHA256   string `json:"sha256"`
	} `json:"files"`
}

func apiReq(t *testing.T, method, url, token, ctype string, body io.Reader) *http.Response {
	t.Helper()
	return do(t, newRequest(t, method, url, token, ctype, body))
}

// putObject sends data to a presigned URL with exactly the headers the
// presign answer gave, and no Authorization.
func putObject(t *testing.T, u string, headers map[string]string, data []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, u, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if strings.EqualFold(k, "Content-Length") {
			n, _ := strconv.ParseInt(v, 10, 64)
			req.ContentLength = n
			continue
		}
		req.Header.Set(k, v)
	}
	resp := do(t, req)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT to presigned URL: status %d", resp.StatusCode)
	}
}

// noRedirect is a client that reports a 307 instead of following it.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// Test25MiBThroughTheBucket: a file at the per-file cap goes presign → PUT
// → commit → list → content (307) → the presigned GET → byte-exact → ack
// → sweep, and the object is gone at the end.
func Test25MiBThroughTheBucket(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"ACK_RETENTION": "0s"}})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	base := srv.URL + "/workspaces/" + ws.String()
	data := make([]byte, limits.DefaultFileBytes)
	rand.Read(data)
	sum := sha256.Sum256(data)

	var pre presignAnswer
	decode(t, apiReq(t, "POST", base+"/chat/uploads/presign", srv.AdminToken, "application/json",
		strings.NewReader(fmt.Sprintf(`{"files":[{"name":"big video.mp4","size":%d,"mimeType":"video/mp4"}]}`, len(data)))), 200, &pre)
	if len(pre.Uploads) != 1 {
		t.Fatalf("presign: got %+v", pre)
	}
	up := pre.Uploads[0]
	if up.Method != "PUT" || up.Headers["Content-Type"] != "video/mp4" || up.Headers["Content-Length"] != strconv.Itoa(len(data)) {
		t.Fatalf("presign answer: got %+v", up)
	}
	if d := time.Until(up.ExpiresAt); d < 14*time.Minute || d > 16*time.Minute {
		t.Fatalf("presign expires_at in %v, want 15 minutes", d)
	}
	pu, _ := url.Parse(up.URL)
	if got := pu.Query().Get("X-Amz-Expires"); got != "900" {
		t.Fatalf("X-Amz-Expires: got %s, want 900", got)
	}
	// Nothing is visible before the commit.
	var list struct {
		Uploads []map[string]any `json:"uploads"`
	}
	decode(t, apiReq(t, "GET", base+"/pending-uploads", tok, "", nil), 200, &list)
	if len(list.Uploads) != 0 {
		t.Fatalf("visible before commit: %v", list.Uploads)
	}

	putObject(t, up.URL, up.Headers, data)
	var staged stagedAnswer
	decode(t, apiReq(t, "POST", base+"/chat/uploads", srv.AdminToken, "application/json",
		strings.NewReader(`{"files":[{"upload_id":"`+up.UploadID+`"}]}`)), 200, &staged)
	f := staged.Files[0]
	if f.Name != "big_video.mp4" || f.MimeType != "video/mp4" || f.Size != int64(len(data)) || f.SHA256 != fmt.Sprintf("%x", sum) {
		t.Fatalf("commit answer: got %+v", f)
	}
	// Committing the same upload again is a retry: the same file, nothing new.
	var again stagedAnswer
	decode(t, apiReq(t, "POST", base+"/chat/uploads", srv.AdminToken, "application/json",
		strings.NewReader(`{"files":[{"upload_id":"`+up.UploadID+`"}]}`)), 200, &again)
	if len(again.Files) != 1 || again.Files[0] != f {
		t.Fatalf("second commit: got %+v, want %+v", again.Files, f)
	}

	decode(t, apiReq(t, "GET", base+"/pending-uploads", tok, "", nil), 200, &list)
	if len(list.Uploads) != 1 || list.Uploads[0]["file_id"] != f.FileID {
		t.Fatalf("list: got %v", list.Uploads)
	}

	req, _ := http.NewRequest("GET", base+"/pending-uploads/"+f.FileID+"/content?redirect=1", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("content: status %d, want 307", resp.StatusCode)
	}
	loc := resp.Header.Get("Location")
	lu, _ := url.Parse(loc)
	q := lu.Query()
	if q.Get("X-Amz-Expires") != "300" || q.Get("response-content-type") != "video/mp4" ||
		q.Get("response-content-disposition") != `attachment; filename="big_video.mp4"; filename*=UTF-8''big_video.mp4` {
		t.Fatalf("presigned GET: got %s", loc)
	}
	var fetched *time.Time
	if err := srv.Pool.QueryRow(context.Background(), `SELECT fetched_at FROM pending_uploads WHERE file_id = $1`, f.FileID).Scan(&fetched); err != nil || fetched == nil {
		t.Fatalf("fetched_at not stamped on the 307: %v", err)
	}
	// The redirect is followed without our Authorization header.
	get, err := http.Get(loc)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if get.StatusCode != 200 || sha256.Sum256(got) != sum {
		t.Fatalf("presigned GET: status %d, %d bytes, not the same bytes", get.StatusCode, len(got))
	}

	var ack map[string]any
	decode(t, apiReq(t, "POST", base+"/pending-uploads/"+f.FileID+"/ack", tok, "", nil), 200, &ack)
	res, err := srv.Store.Sweep(context.Background(), 0)
	if err != nil || res.Acked != 1 {
		t.Fatalf("sweep: got %+v, %v", res, err)
	}
	if _, err := srv.Objects.Size(context.Background(), "objects/"+ws.String()+"/"+f.FileID); err == nil {
		t.Fatal("object still in the bucket after the sweep")
	}
	if _, err := srv.Objects.Size(context.Background(), "staging/"+ws.String()+"/"+up.UploadID); err == nil {
		t.Fatal("staging object still in the bucket after the commit")
	}
}

// TestCommitRefusals: a PUT of the wrong size, an upload never PUT, an
// unknown upload ID: 409 and nothing stored, in either table.
func TestCommitRefusals(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{S3: true})
	ws := uuid.New()
	base := srv.URL + "/workspaces/" + ws.String()
	presign := func(size int) (string, string, map[string]string) {
		var pre presignAnswer
		decode(t, apiReq(t, "POST", base+"/chat/uploads/presign", srv.AdminToken, "application/json",
			strings.NewReader(fmt.Sprintf(`{"files":[{"name":"a.bin","size":%d}]}`, size))), 200, &pre)
		u := pre.Uploads[0]
		return u.UploadID, u.URL, u.Headers
	}
	commit := func(t *testing.T, ids ...string) {
		t.Helper()
		var parts []string
		for _, id := range ids {
			parts = append(parts, `{"upload_id":"`+id+`"}`)
		}
		var body map[string]any
		decode(t, apiReq(t, "POST", base+"/chat/uploads", srv.AdminToken, "application/json",
			strings.NewReader(`{"files":[`+strings.Join(parts, ",")+`]}`)), http.StatusConflict, &body)
		if body["error"] != "upload not received" {
			t.Fatalf("got %v", body)
		}
		if n := sqlCount(t, srv, "SELECT count(*) FROM pending_uploads") + sqlCount(t, srv, "SELECT count(*) FROM activity_logs"); n != 0 {
			t.Fatalf("rows stored: %d", n)
		}
	}
	goodID, goodURL, goodHeaders := presign(1000)
	putObject(t, goodURL, goodHeaders, make([]byte, 1000))

	t.Run("WrongSize", func(t *testing.T) {
		id, u, h := presign(1000)
		// moto does not enforce the signed Content-Length (S3 does); the
		// commit's own check of the object's size is the guard that holds.
		h["Content-Length"] = "999"
		putObject(t, u, h, make([]byte, 999))
		commit(t, goodID, id)
	})
	t.Run("NeverUploaded", func(t *testing.T) {
		id, _, _ := presign(10)
		commit(t, goodID, id)
	})
	t.Run("UnknownUploadID", func(t *testing.T) {
		commit(t, goodID, uuid.NewString())
	})
	t.Run("NotTheDeclaredSHA256", func(t *testing.T) {
		declared := sha256.Sum256(make([]byte, 1000))
		var pre presignAnswer
		decode(t, apiReq(t, "POST", base+"/chat/uploads/presign", srv.AdminToken, "application/json",
			strings.NewReader(fmt.Sprintf(`{"files":[{"name":"a.bin","size":1000,"sha256":"%x"}]}`, declared))), 200, &pre)
		u := pre.Uploads[0]
		if got, want := u.Headers["x-amz-checksum-sha256"], base64.StdEncoding.EncodeToString(declared[:]); got != want {
			t.Fatalf("PUT headers: x-amz-checksum-sha256 %q, want %q", got, want)
		}
		// moto does not check the signed checksum against the bytes (S3
		// does); the commit's check of the bucket's checksum holds.
		putObject(t, u.URL, u.Headers, bytes.Repeat([]byte{1}, 1000))
		commit(t, goodID, u.UploadID)
	})
	t.Run("InvalidSHA256", func(t *testing.T) {
		for _, bad := range []string{"abc", strings.Repeat("g", 64), strings.Repeat("a", 66)} {
			res := apiReq(t, "POST", base+"/chat/uploads/presign", srv.AdminToken, "application/json",
				strings.NewReader(`{"files":[{"name":"a.bin","size":10,"sha256":"`+bad+`"}]}`))
			var body map[string]any
			decode(t, res, http.StatusBadRequest, &body)
			if body["error"] != "invalid sha256 (want 64 hex digits)" || body["filename"] != "a.bin" {
				t.Fatalf("sha256 %q: got %v", bad, body)
			}
		}
	})
	t.Run("OtherWorkspacesUpload", func(t *testing.T) {
		other := uuid.New()
		var body map[string]any
		decode(t, apiReq(t, "POST", srv.URL+"/workspaces/"+other.String()+"/chat/uploads", srv.AdminToken, "application/json",
			strings.NewReader(`{"files":[{"upload_id":"`+goodID+`"}]}`)), http.StatusConflict, &body)
	})
	t.Run("GoodOneStillCommits", func(t *testing.T) {
		var staged stagedAnswer
		decode(t, apiReq(t, "POST", base+"/chat/uploads", srv.AdminToken, "application/json",
			strings.NewReader(`{"files":[{"upload_id":"`+goodID+`"}]}`)), 200, &staged)
		if len(staged.Files) != 1 || staged.Files[0].Size != 1000 {
			t.Fatalf("got %+v", staged)
		}
	})
}

// TestInlineOrBucketByInlineMax: with a bucket, a 1 KiB file stays in
// Postgres and a 1 MiB file goes to S3 (INLINE_MAX_BYTES 256 KiB), and both
// come back byte-exact in the response body.
func TestInlineOrBucketByInlineMax(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{S3: true})
	ws := uuid.New()
	base := srv.URL + "/workspaces/" + ws.String()
	small, large := make([]byte, 1<<10), make([]byte, 1<<20)
	rand.Read(small)
	rand.Read(large)
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for name, data := range map[string][]byte{"small.bin": small, "large.bin": large} {
		fw, _ := mw.CreateFormFile("files", name)
		fw.Write(data)
	}
	mw.Close()
	var staged stagedAnswer
	decode(t, apiReq(t, "POST", base+"/chat/uploads", srv.AdminToken, mw.FormDataContentType(), &body), 200, &staged)
	for _, f := range staged.Files {
		var inline bool
		var key *string
		if err := srv.Pool.QueryRow(context.Background(),
			`SELECT content IS NOT NULL, s3_key FROM pending_uploads WHERE file_id = $1`, f.FileID).Scan(&inline, &key); err != nil {
			t.Fatal(err)
		}
		want, wantInline := small, true
		if f.Name == "large.bin" {
			want, wantInline = large, false
		}
		if inline != wantInline || (key != nil) == wantInline {
			t.Fatalf("%s: inline=%v s3_key=%v, want inline=%v", f.Name, inline, key, wantInline)
		}
		if !wantInline {
			if n, err := srv.Objects.Size(context.Background(), *key); err != nil || n != int64(len(want)) {
				t.Fatalf("%s: object size %d, %v", f.Name, n, err)
			}
		}
		resp := apiReq(t, "GET", base+"/pending-uploads/"+f.FileID+"/content", srv.AdminToken, "", nil)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(got, want) {
			t.Fatalf("%s: content status %d, %d bytes", f.Name, resp.StatusCode, len(got))
		}
	}
}

func do(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func decode(t *testing.T, resp *http.Response, status int, v any) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("status: got %d, want %d: %s", resp.StatusCode, status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}
