package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/client/inbox"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/cptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

const (
	// resumeFileBytes is the file of the resume case: 7 parts of 8 MiB
	// (the service's defaults: MULTIPART_THRESHOLD_BYTES 16 MiB,
	// MULTIPART_PART_BYTES 8 MiB), the last one 4 MiB. More than four are
	// left to send after the resume, so that the four in flight are a
	// bound. (The largest file, 100 MiB, resumes in TestCanvasDropIn.)
	resumeFileBytes = 52 << 20
	// cutAbove: until the page resumes, the connection of every PUT of a
	// part above this one is cut.
	cutAbove = 2
	// abortInPartsBytes is the file aborted while its parts travel (8
	// parts), and abortInPartsAt the bytes sent when it is: more than four
	// parts hold, so at least one part is in the bucket when the abort
	// comes, and far enough from the end that the progress events (which
	// may jump by megabytes: the socket's buffers) cannot pass it by.
	abortInPartsBytes = 64 << 20
	abortInPartsAt    = 33 << 20
	// storeCaseBytes is the file of the resume store's cases and of the
	// changed file's: 3 parts.
	storeCaseBytes = 17 << 20
)

// partWatch watches the browser's part PUTs (…?partNumber=N) to one
// workspace's staging keys: before the page asks the service to resume
// (resumed), the connection of every part above cutAbove (0: none) is
// cut as it arrives, nothing reaching moto; every other PUT goes through,
// and the PUTs and bytes that reached moto, and the parts moto stored,
// are counted per phase (0 before the resume, 1 after) and part number.
type partWatch struct {
	ws       uuid.UUID
	cutAbove int
	resumed  atomic.Bool

	mu     sync.Mutex
	puts   [2]map[int]int
	bytes  [2]map[int]int64
	stored [2]map[int]bool
	// heldAtResume is the parts the bucket itself held (ListParts) when
	// the page first asked to resume: what the page must not send again.
	// The proxy's own count can miss a part: a PUT the page gave up on
	// (its sibling's connection cut) after moto had read all its bytes is
	// stored by moto though the proxy saw no answer.
	heldAtResume map[int]bool
	cut          int
	inFlight     int
	maxInFlight  int
}

func newPartWatch(ws uuid.UUID, cutAbove int) *partWatch {
	w := &partWatch{ws: ws, cutAbove: cutAbove}
	for i := range 2 {
		w.puts[i], w.bytes[i], w.stored[i] = map[int]int{}, map[int]int64{}, map[int]bool{}
	}
	return w
}

// phase is 0 before the resume, 1 after.
func (w *partWatch) phase() int {
	if w.resumed.Load() {
		return 1
	}
	return 0
}

// sortedParts is the part numbers of m, in order.
func sortedParts(m map[int]bool) []int {
	var out []int
	for n := range m {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// countingBody counts the bytes read through it. The count is atomic:
// the proxy's transport may still be reading the body on its own
// goroutine when the backend has answered and the handler reads n.
type countingBody struct {
	io.ReadCloser
	n atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	b.n.Add(int64(k))
	return k, err
}

// partsProxy stands between everyone and moto, as bucketProxy does: the
// browser's PUTs are slowed to browserPutRate, and those of parts to a
// watched workspace go through its partWatch. It counts the requests
// from a page that carry a Cookie: the session is the service's
// credential, never the bucket's.
func partsProxy(t *testing.T, moto string, cookies *atomic.Int64, watches ...*partWatch) string {
	t.Helper()
	u, err := url.Parse(moto)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Cookie") != "" {
			cookies.Add(1)
		}
		if r.Method != http.MethodPut || r.Header.Get("Origin") == "" {
			rp.ServeHTTP(w, r)
			return
		}
		r.Body = &throttledBody{ReadCloser: r.Body, rate: browserPutRate, start: time.Now()}
		part, _ := strconv.Atoi(r.URL.Query().Get("partNumber"))
		var pw *partWatch
		for _, c := range watches {
			if part > 0 && strings.Contains(r.URL.Path, "/staging/"+c.ws.String()+"/") {
				pw = c
			}
		}
		if pw == nil {
			rp.ServeHTTP(w, r)
			return
		}
		phase := pw.phase()
		if phase == 0 && pw.cutAbove > 0 && part > pw.cutAbove {
			pw.mu.Lock()
			pw.cut++
			pw.mu.Unlock()
			// The connection drops: no answer, nothing reaches moto.
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // a reset, as a cut line gives
				}
				_ = conn.Close()
			}
			return
		}
		pw.mu.Lock()
		pw.inFlight++
		pw.maxInFlight = max(pw.maxInFlight, pw.inFlight)
		pw.mu.Unlock()
		body := &countingBody{ReadCloser: r.Body}
		r.Body = body
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		rp.ServeHTTP(sw, r)
		pw.mu.Lock()
		defer pw.mu.Unlock()
		pw.inFlight--
		pw.puts[phase][part]++
		pw.bytes[phase][part] += body.n.Load()
		if sw.status/100 == 2 {
			pw.stored[phase][part] = true
		}
	}))
	t.Cleanup(s.Close)
	return s.URL
}

// rewordedPrefix begins every message of the service's error answers
// that reworded passes on.
const rewordedPrefix = "reworded by the test"

// reworded answers the page's requests (those with an Origin; the Go
// client's go through as they are) as next does, with the message of
// every JSON error answer reworded: the browser client must act on the
// answer's code (or, from a server older than codes, on its status and
// fields), never on its message, which the service may reword.
func reworded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") == "" {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		var v map[string]any
		if rec.Code >= 400 && json.Unmarshal(body, &v) == nil {
			if _, ok := v["error"].(string); ok {
				v["error"] = fmt.Sprintf("%s: an answer %d", rewordedPrefix, rec.Code)
				body, _ = json.Marshal(v)
			}
		}
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

// notReceivedAnswer tells whether body is the commit's upload_not_received
// answer: its code, or, from a server older than codes, no code and the
// upload it names.
func notReceivedAnswer(body map[string]any) bool {
	id, _ := body["upload_id"].(string)
	code, hasCode := body["code"]
	return id != "" && (code == "upload_not_received" || !hasCode)
}

// partsHeld returns the part numbers the bucket holds of the incomplete
// multipart uploads under prefix, as S3 lists them (ListParts). It runs
// in the API's handler, so a failure is an Errorf, never a Fatalf.
func partsHeld(t *testing.T, c *s3.Client, bucket, prefix string) map[int]bool {
	held := map[int]bool{}
	ups, err := c.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Errorf("list multipart uploads under %s: %v", prefix, err)
		return held
	}
	for _, up := range ups.Uploads {
		out, err := c.ListParts(context.Background(), &s3.ListPartsInput{Bucket: aws.String(bucket), Key: up.Key, UploadId: up.UploadId})
		if err != nil {
			t.Errorf("list parts of %s: %v", aws.ToString(up.Key), err)
			continue
		}
		for _, p := range out.Parts {
			held[int(aws.ToInt32(p.PartNumber))] = true
		}
	}
	return held
}

// incompleteUploadsUnder lists the bucket's multipart uploads under
// prefix that were neither completed nor aborted.
func incompleteUploadsUnder(t *testing.T, c *s3.Client, bucket, prefix string) []types.MultipartUpload {
	t.Helper()
	out, err := c.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatalf("list multipart uploads under %s: %v", prefix, err)
	}
	return out.Uploads
}

// TestBrowserClientInParts runs the client's uploads in parts in
// Chromium against the service with a bucket on moto, at the service's
// default threshold and part size, in session mode (the canvas's
// production credential: no token, the control plane's cookie). A
// 52 MiB file (7 parts): the connection is cut after 2 parts, the upload
// fails, the page is reloaded and uploads the same file again: it
// resumes, the parts the bucket holds are not sent again (the proxy
// counts what reaches moto), at most four parts travel at once, and the
// workspace pulls a byte-exact file with the right SHA-256. An upload
// aborted while its parts travel leaves no incomplete multipart upload in
// the bucket, no promise, no resume entry. A resume store of the page's
// own (async): a stale entry is dropped and the file starts over, one
// part at a time with partsInFlight 1; an entry committed since is
// committed again, the same file, no part sent. A file whose bytes
// changed under the same fingerprint after its first part: the resume's
// commit is refused (moto does not check part checksums; the declared
// whole-file SHA-256 catches it), the entry and the upload are dropped,
// and the next call starts over. No cookie reaches the bucket.
func TestBrowserClientInParts(t *testing.T) {
	chromium, node := requireBrowser(t)

	page := pageServer(t)
	moto := s3test.MustStart(t)
	cp := cptest.Start(t, tenantSlug)
	const member = "parts-session-0123456789"
	cp.AddMember(member, "user-parts")
	wsResume, wsAbort, wsStore, wsChanged := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	resume, abort, stored := newPartWatch(wsResume, cutAbove), newPartWatch(wsAbort, 0), newPartWatch(wsStore, 0)
	changed := newPartWatch(wsChanged, 1)
	watches := []*partWatch{resume, abort, stored, changed}
	var bucketCookies atomic.Int64
	bucketURL := partsProxy(t, moto.URL, &bucketCookies, watches...)
	env := cp.Env()
	env["S3_ENDPOINT"] = bucketURL
	env["CORS_ALLOWED_ORIGINS"] = page.URL
	env["MAX_FILE_BYTES"] = "104857600"
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: env})
	s3c := s3test.NewClient(srv.S3)
	if _, err := s3c.PutBucketCors(context.Background(), &s3.PutBucketCorsInput{
		Bucket: aws.String(srv.Bucket),
		CORSConfiguration: &types.CORSConfiguration{CORSRules: []types.CORSRule{{
			AllowedMethods: []string{"PUT", "GET"}, AllowedOrigins: []string{page.URL},
			AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: aws.Int32(3600),
		}}},
	}); err != nil {
		t.Fatalf("bucket CORS: %v", err)
	}
	partBytes := srv.Store.PartBytes
	if srv.Store.MultipartThreshold >= abortInPartsBytes || partBytes != 8<<20 {
		t.Fatalf("the service's multipart settings: threshold %d, parts of %d; the test assumes the defaults (16 MiB, 8 MiB)",
			srv.Store.MultipartThreshold, partBytes)
	}
	partCount := int((resumeFileBytes + partBytes - 1) / partBytes)
	partSize := func(n int) int64 { return min(partBytes, resumeFileBytes-int64(n-1)*partBytes) }

	// The service, its messages reworded for the page; a resume ends its
	// workspace's cut.
	mux := reworded(srv.App.API.Mux())
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, pw := range watches {
			if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/workspaces/"+pw.ws.String()+"/chat/uploads/presign/") {
				if !pw.resumed.Swap(true) {
					held := partsHeld(t, s3c, srv.Bucket, "staging/"+pw.ws.String()+"/")
					pw.mu.Lock()
					pw.heldAtResume = held
					pw.mu.Unlock()
				}
			}
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)

	// The same file both times: a reloaded page picks it again.
	big := fileSpec{Name: "fifty-two.bin", Size: resumeFileBytes, Seed: 8, Type: "application/octet-stream", LastModified: 1_767_225_600_000}
	upload := map[string]any{"api": api.URL, "token": nil, "ws": wsResume.String(), "files": []fileSpec{big}, "downloadMax": 0}
	// A file changed between its first parts and the resume: the same
	// name, size and lastModified (its fingerprint), other bytes.
	before := fileSpec{Name: "edited.bin", Size: storeCaseBytes, Seed: 11, LastModified: 1_767_225_600_000}
	after := before
	after.Seed = 12
	changedArgs := func(f fileSpec) map[string]any {
		return map[string]any{"api": api.URL, "token": nil, "ws": wsChanged.String(), "files": []fileSpec{f}, "downloadMax": 0}
	}
	session := []map[string]string{{"name": cptest.CookieName, "value": member, "url": page.URL}}
	start := time.Now()
	out := driveSteps(t, node, chromium, []step{
		{Name: "cut", Page: page.URL + "/index.html", Fn: "upload", Args: upload, Cookies: session},
		{Name: "reloaded", Page: page.URL + "/index.html", Fn: "upload", Args: upload, Cookies: session},
		{Name: "abort", Page: page.URL + "/index.html", Fn: "abortMidPut", Args: map[string]any{
			"api": api.URL, "token": nil, "ws": wsAbort.String(), "abortAt": abortInPartsAt,
			"file": fileSpec{Name: "aborted in parts.bin", Size: abortInPartsBytes, Seed: 9}}, Cookies: session},
		{Name: "store", Page: page.URL + "/index.html", Fn: "storeCases", Args: map[string]any{
			"api": api.URL, "token": nil, "ws": wsStore.String(),
			"file": fileSpec{Name: "remembered.bin", Size: storeCaseBytes, Seed: 10, LastModified: 1_767_225_600_000}}, Cookies: session},
		{Name: "changedCut", Page: page.URL + "/index.html", Fn: "upload", Args: changedArgs(before), Cookies: session},
		{Name: "changed", Page: page.URL + "/index.html", Fn: "upload", Args: changedArgs(after), Cookies: session},
		{Name: "changedAgain", Page: page.URL + "/index.html", Fn: "upload", Args: changedArgs(after), Cookies: session},
	})
	type storeCall struct {
		OK     bool     `json:"ok"`
		Error  *jsError `json:"error"`
		Result struct{ Files []client.StagedFile }
		Log    struct{ Gets, Sets, Deletes int }
	}
	var res struct {
		Cut, Reloaded                     uploadResult
		Abort                             abortResult
		Store                             struct{ First, Again storeCall }
		ChangedCut, Changed, ChangedAgain uploadResult
	}
	decodeSteps(t, out, &res)
	t.Logf("browser steps: %s", time.Since(start).Round(time.Millisecond))

	t.Run("ResumesAfterReload", func(t *testing.T) {
		cut := res.Cut
		if cut.OK || cut.Error == nil || !cut.Error.IsPendingUploadsErr || (cut.Error.Code != "network" && cut.Error.Code != "timeout") {
			t.Fatalf("the upload through a cut connection: want a PendingUploadsError with code network, got ok=%v %+v", cut.OK, cut.Error)
		}
		if !cut.IsSecure || !cut.Subtle {
			t.Errorf("the page is not a secure context with SubtleCrypto: no part checksums")
		}
		if cut.ResumeEntries != 1 {
			t.Errorf("resume entries after the failure: %d, want 1", cut.ResumeEntries)
		}
		resume.mu.Lock()
		defer resume.mu.Unlock()
		before := sortedParts(resume.heldAtResume)
		var held int64
		for _, n := range before {
			held += partSize(n)
		}
		t.Logf("before the reload: parts %v in the bucket (%d bytes; %v answered 2xx through the proxy), %d PUTs cut", before, held, sortedParts(resume.stored[0]), resume.cut)
		if len(before) == 0 || len(before) >= partCount || resume.cut == 0 {
			t.Fatalf("before the reload: parts %v stored, %d cut; want some of %d stored and some cut", before, resume.cut, partCount)
		}

		up := res.Reloaded
		if !up.OK {
			t.Fatalf("the upload after the reload: %+v", up.Error)
		}
		body := pattern(resumeFileBytes, big.Seed)
		want := sha256Hex(body)
		if got := up.Result.Files; len(got) != 1 || got[0].Size != resumeFileBytes || got[0].SHA256 != want || got[0].Name != big.Name {
			t.Fatalf("answer: %+v, want %s, %d bytes, sha256 %s", got, big.Name, resumeFileBytes, want)
		}
		if up.ResumeEntries != 0 {
			t.Errorf("resume entries after the commit: %d, want none", up.ResumeEntries)
		}
		// Only the parts the bucket did not hold, each once, whole.
		var sent int64
		for n := 1; n <= partCount; n++ {
			puts, b := resume.puts[1][n], resume.bytes[1][n]
			sent += b
			switch {
			case resume.heldAtResume[n] && puts != 0:
				t.Errorf("part %d, in the bucket before the reload, sent again: %d PUTs, %d bytes", n, puts, b)
			case !resume.heldAtResume[n] && (puts != 1 || b != partSize(n) || !resume.stored[1][n]):
				t.Errorf("part %d after the reload: %d PUTs, %d bytes (stored %v); want one of %d bytes", n, puts, b, resume.stored[1][n], partSize(n))
			}
		}
		t.Logf("after the reload: %d bytes sent for the %d missing parts; at most %d parts in flight", sent, partCount-len(before), resume.maxInFlight)
		if sent != resumeFileBytes-held {
			t.Errorf("bytes that reached the bucket after the reload: %d, want %d", sent, resumeFileBytes-held)
		}
		if resume.maxInFlight < 2 || resume.maxInFlight > 4 {
			t.Errorf("parts in flight at once: at most %d, want 2 to 4 (the default, 4)", resume.maxInFlight)
		}
		// Progress starts at what the bucket held and ends at the file.
		if p := up.Progress; p.First == nil || p.First.Loaded != held || p.Last == nil || p.Last.Loaded != resumeFileBytes || p.Last.Total != resumeFileBytes {
			t.Errorf("progress: first %+v, last %+v; want %d then %d of %d", p.First, p.Last, held, resumeFileBytes, resumeFileBytes)
		}
		if u, a := rowsOf(t, srv, wsResume); u != 1 || a != 1 {
			t.Errorf("rows: %d uploads, %d activity rows; want 1 and 1", u, a)
		}
		if left := incompleteUploadsUnder(t, s3c, srv.Bucket, "staging/"+wsResume.String()+"/"); len(left) != 0 {
			t.Errorf("incomplete multipart uploads left: %d", len(left))
		}

		// The workspace pulls it byte-exact.
		wsc, err := client.New(api.URL, srv.WorkspaceToken(t, wsResume))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pr, err := inbox.New(wsc, wsResume, dir).Pull(ctx)
		if err != nil {
			t.Fatalf("pull: %v", err)
		}
		if len(pr.Delivered) != 1 {
			t.Fatalf("pull delivered %d files: %+v", len(pr.Delivered), pr.Delivered)
		}
		got := apptest.DirFiles(t, dir, inbox.StateDirName)[big.Name]
		if !bytes.Equal(got, body) || sha256Hex(got) != want {
			t.Errorf("pulled %s: %d bytes, sha256 %s; want the %d bytes the browser sent, %s", big.Name, len(got), sha256Hex(got), len(body), want)
		}
	})

	t.Run("AbortInPartsDropsTheUpload", func(t *testing.T) {
		ab := res.Abort
		if ab.OK || ab.Error == nil || !ab.Error.IsPendingUploadsErr || ab.Error.Code != "aborted" {
			t.Fatalf("want a PendingUploadsError with code aborted, got ok=%v %+v", ab.OK, ab.Error)
		}
		abort.mu.Lock()
		stored := sortedParts(abort.stored[0])
		abort.mu.Unlock()
		t.Logf("aborted at %d of %d bytes, parts %v in the bucket then", ab.AbortedAt, ab.Total, stored)
		if ab.AbortedAt < abortInPartsAt || ab.AbortedAt >= ab.Total || len(stored) == 0 {
			t.Fatalf("aborted at %d of %d bytes with parts %v stored: not while the parts traveled", ab.AbortedAt, ab.Total, stored)
		}
		if left := incompleteUploadsUnder(t, s3c, srv.Bucket, "staging/"+wsAbort.String()+"/"); len(left) != 0 {
			t.Errorf("after an abort: %d incomplete multipart uploads in the bucket", len(left))
		}
		if n := count(t, srv, `SELECT count(*) FROM presigned_uploads WHERE workspace_id = $1`, wsAbort); n != 0 {
			t.Errorf("after an abort: %d presigned uploads left", n)
		}
		if u, a := rowsOf(t, srv, wsAbort); u != 0 || a != 0 {
			t.Errorf("after an abort: %d uploads, %d activity rows; want none", u, a)
		}
		if ab.ResumeEntries != 0 {
			t.Errorf("after an abort: %d resume entries, want none", ab.ResumeEntries)
		}
	})

	t.Run("ResumeStore", func(t *testing.T) {
		first, again := res.Store.First, res.Store.Again
		if !first.OK || len(first.Result.Files) != 1 {
			t.Fatalf("an upload whose remembered entry the service does not know: %+v", first.Error)
		}
		// The stale entry dropped, the new upload remembered, then dropped
		// once committed.
		if l := first.Log; l.Gets != 1 || l.Sets != 1 || l.Deletes != 2 {
			t.Errorf("the store after a stale entry: %+v, want 1 get, 1 set, 2 deletes", l)
		}
		body := pattern(storeCaseBytes, 10)
		if f := first.Result.Files[0]; f.Size != storeCaseBytes || f.SHA256 != sha256Hex(body) {
			t.Errorf("answer: %+v, want %d bytes, sha256 %s", f, storeCaseBytes, sha256Hex(body))
		}
		if !again.OK || len(again.Result.Files) != 1 || again.Result.Files[0].FileID != first.Result.Files[0].FileID {
			t.Fatalf("an upload whose remembered entry was committed: %+v %+v, want the same file %s", again.Result.Files, again.Error, first.Result.Files[0].FileID)
		}
		if l := again.Log; l.Gets != 2 || l.Sets != 1 || l.Deletes != 3 {
			t.Errorf("the store after a committed entry: %+v, want 2 gets, 1 set, 3 deletes in all", l)
		}
		// Each part once, one at a time (partsInFlight 1); none for the
		// second call. (Nothing is cut here: the phases do not matter.)
		stored.mu.Lock()
		defer stored.mu.Unlock()
		for n := 1; n <= 3; n++ {
			if p := stored.puts[0][n] + stored.puts[1][n]; p != 1 {
				t.Errorf("part %d: %d PUTs, want 1", n, p)
			}
		}
		if stored.maxInFlight != 1 {
			t.Errorf("parts in flight at once with partsInFlight 1: %d", stored.maxInFlight)
		}
		if u, a := rowsOf(t, srv, wsStore); u != 1 || a != 1 {
			t.Errorf("rows: %d uploads, %d activity rows; want 1 and 1", u, a)
		}
	})

	t.Run("ChangedFileStartsOver", func(t *testing.T) {
		if c := res.ChangedCut; c.OK || c.ResumeEntries != 1 {
			t.Fatalf("the first upload, cut after part 1: ok=%v, %d resume entries; want a failure and 1", c.OK, c.ResumeEntries)
		}
		// moto does not check a part's checksum (S3 does: 400 BadDigest,
		// which the client drops the upload on at once), so the changed
		// parts go in, and the commit refuses the file: its SHA-256 is not
		// the one declared.
		c := res.Changed
		if c.OK || c.Error == nil || c.Error.Status != http.StatusConflict || !notReceivedAnswer(c.Error.Body) {
			t.Fatalf("the changed file's resume: ok=%v %+v, want 409 upload_not_received", c.OK, c.Error)
		}
		if !strings.HasPrefix(c.Error.Message, "commit: "+rewordedPrefix) {
			t.Errorf("the changed file's error: %q, want the reworded message: the client read the answer by its code", c.Error.Message)
		}
		if c.ResumeEntries != 0 {
			t.Errorf("resume entries after the refused commit: %d, want none (a resume would send nothing)", c.ResumeEntries)
		}
		a := res.ChangedAgain
		want := sha256Hex(pattern(storeCaseBytes, after.Seed))
		if !a.OK || len(a.Result.Files) != 1 || a.Result.Files[0].SHA256 != want {
			t.Fatalf("the changed file again: ok=%v %+v %+v, want sha256 %s", a.OK, a.Error, a.Result.Files, want)
		}
		// Part 1 before the cut; parts 2 and 3 for the resume; all three
		// again for the new upload.
		changed.mu.Lock()
		got := [2][4]int{}
		for ph := range 2 {
			for n := 1; n <= 3; n++ {
				got[ph][n] = changed.puts[ph][n]
			}
		}
		changed.mu.Unlock()
		if want := [2][4]int{{0, 1, 0, 0}, {0, 1, 2, 2}}; got != want {
			t.Errorf("PUTs per part that reached the bucket, before and after the resume: %v, want %v", got, want)
		}
		if u, n := rowsOf(t, srv, wsChanged); u != 1 || n != 1 {
			t.Errorf("rows: %d uploads, %d activity rows; want 1 and 1", u, n)
		}
		if n := count(t, srv, `SELECT count(*) FROM presigned_uploads WHERE workspace_id = $1 AND file_id IS NULL`, wsChanged); n != 0 {
			t.Errorf("uncommitted presigned uploads left: %d", n)
		}
		if left := incompleteUploadsUnder(t, s3c, srv.Bucket, "staging/"+wsChanged.String()+"/"); len(left) != 0 {
			t.Errorf("incomplete multipart uploads left: %d", len(left))
		}
	})

	t.Run("NoCookieToTheBucket", func(t *testing.T) {
		if n := bucketCookies.Load(); n != 0 {
			t.Errorf("%d requests to the bucket carried the page's cookie", n)
		}
	})
}
