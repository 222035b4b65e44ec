package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/internal/clienttest/clientkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

const mib = 1 << 20

// partsServer is the service with a bucket behind a PartProxy, files
// above 5 MiB going in parts of 5 MiB (so that a few MiB make several
// parts).
func partsServer(t *testing.T) (*apptest.Server, *s3test.PartProxy) {
	t.Helper()
	proxy := s3test.StartPartProxy(t, s3test.MustStart(t).URL)
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{
		"MULTIPART_THRESHOLD_BYTES": fmt.Sprint(5 * mib), "MULTIPART_PART_BYTES": fmt.Sprint(5 * mib),
		"S3_ENDPOINT": proxy.URL}})
	return srv, proxy
}

// download fetches a staged file with the workspace's token and fails t
// unless it is want, byte for byte.
func download(t *testing.T, srv *apptest.Server, ws uuid.UUID, s client.StagedFile, want []byte) {
	t.Helper()
	wsc := clientkit.MustClient(t, srv.URL, srv.WorkspaceToken(t, ws))
	var buf bytes.Buffer
	f := client.File{FileID: s.FileID, Size: s.Size, SHA256: s.SHA256}
	if _, err := wsc.Download(clientkit.Ctx(t), ws, f, &buf); err != nil {
		t.Fatalf("download: %v", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("download: %d bytes, not the %d sent", buf.Len(), len(want))
	}
}

func rows(t *testing.T, srv *apptest.Server, ws uuid.UUID) int {
	t.Helper()
	var n int
	if err := srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pending_uploads WHERE workspace_id = $1`, ws).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// partNumbers is the set of part numbers of counts, sorted.
func partNumbers(counts map[int]int) []int { return slices.Sorted(maps.Keys(counts)) }

// TestUploadInParts: a 21 MiB file above the threshold goes in 5 parts,
// at most PartsInFlight at once, each PUT once; progress ends at the
// file's size; the workspace gets the bytes, byte-exact. A small file in
// the same call still goes as multipart/form-data.
func TestUploadInParts(t *testing.T) {
	srv, proxy := partsServer(t)
	ws := uuid.New()
	c := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	c.PartsInFlight = 2
	data := clientkit.RandomBytes(21*mib+123, 21)
	big := client.BytesFile("big.bin", "application/octet-stream", data)
	var mu sync.Mutex
	var reports []int64
	big.Progress = func(n int64) {
		mu.Lock()
		reports = append(reports, n)
		mu.Unlock()
	}
	var presigned client.PresignedUpload
	big.OnPresigned = func(p client.PresignedUpload) error { presigned = p; return nil }
	staged, err := c.Upload(clientkit.Ctx(t), ws, []client.UploadFile{client.BytesFile("small.txt", "text/plain", []byte("small")), big})
	if err != nil {
		t.Fatal(err)
	}
	if len(staged) != 2 || staged[1].Size != int64(len(data)) || staged[1].SHA256 != hexSum(data) {
		t.Fatalf("staged: %+v", staged)
	}
	if m := presigned.Multipart; m == nil || m.PartCount != 5 || m.PartBytes != 5*mib || len(m.Parts) != 5 {
		t.Fatalf("plan: %+v", presigned)
	}
	if got := proxy.Parts(); !slices.Equal(partNumbers(got), []int{1, 2, 3, 4, 5}) || len(got) != 5 || got[1] != 1 {
		t.Errorf("part PUTs: got %v, want each of 1..5 once", got)
	}
	if n := proxy.MaxInFlight(); n > 2 || n < 1 {
		t.Errorf("parts in flight: got %d at most, want 1..2", n)
	}
	if len(reports) == 0 || reports[len(reports)-1] != int64(len(data)) {
		t.Errorf("progress: %d reports, last %v, want %d", len(reports), reports[max(len(reports)-1, 0):], len(data))
	}
	download(t, srv, ws, staged[1], data)
}

// interrupted starts an upload of data in parts, lets the first done
// parts through, cancels it while the next are held (as a Ctrl-C would),
// and returns its upload ID; the held parts are then dropped.
func interrupted(t *testing.T, c *client.Client, proxy *s3test.PartProxy, ws uuid.UUID, f client.UploadFile, done int) uuid.UUID {
	t.Helper()
	proxy.Hold(done)
	defer proxy.Unhold()
	ctx, cancel := context.WithCancel(clientkit.Ctx(t))
	defer cancel()
	var id uuid.UUID
	f.OnPresigned = func(p client.PresignedUpload) error { id = p.UploadID; return nil }
	errc := make(chan error, 1)
	go func() {
		_, err := c.Upload(ctx, ws, []client.UploadFile{f})
		errc <- err
	}()
	if !proxy.WaitHeld(clientkit.Ctx(t), done) {
		t.Fatal("the upload never stalled")
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled upload: got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled upload did not stop")
	}
	if id == uuid.Nil {
		t.Fatal("OnPresigned was not called")
	}
	return id
}

// TestResumeUpload: an upload in parts cancelled mid-way (2 parts of 5
// in the bucket) is resumed: only the 3 others are PUT, the commit
// stages one file, byte-exact. Resuming it again answers the same file
// (the commit's answer, replayed). An upload the server aborted, or that
// expired, is ErrUploadGone.
func TestResumeUpload(t *testing.T) {
	srv, proxy := partsServer(t)
	ws := uuid.New()
	c := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	data := clientkit.RandomBytes(21*mib+123, 22)
	f := client.BytesFile("big.bin", "", data)

	id := interrupted(t, c, proxy, ws, f, 2)
	first := proxy.Parts()
	if len(first) != 2 {
		t.Fatalf("parts before the cancel: got %v, want 2", first)
	}
	if n := rows(t, srv, ws); n != 0 {
		t.Fatalf("rows after the cancel: %d, want 0", n)
	}
	proxy.Reset()
	var sent atomic.Int64
	var firstReport atomic.Int64
	firstReport.Store(-1)
	f.Progress = func(n int64) { firstReport.CompareAndSwap(-1, n); sent.Store(n) }
	var plan *client.PartPlan
	f.OnPresigned = func(p client.PresignedUpload) error {
		if p.UploadID != id || sent.Load() != 0 {
			t.Errorf("OnPresigned: upload %s with %d bytes sent, want %s before any", p.UploadID, sent.Load(), id)
		}
		plan = p.Multipart
		return nil
	}
	staged, err := c.ResumeUpload(clientkit.Ctx(t), ws, id, f)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if plan == nil || len(plan.Received) != 2 || plan.PartCount != 5 {
		t.Errorf("OnPresigned on resume: plan %+v, want 2 of 5 parts received", plan)
	}
	if got, want := firstReport.Load(), int64(2*5*mib); got != want {
		t.Errorf("progress: first report %d, want %d (the 2 parts held)", got, want)
	}
	second := proxy.Parts()
	for n := 1; n <= 5; n++ {
		if first[n]+second[n] != 1 {
			t.Errorf("part %d: PUT %d times before the cancel and %d on resume, want once in all", n, first[n], second[n])
		}
	}
	if sent.Load() != int64(len(data)) {
		t.Errorf("progress: ended at %d, want %d (the parts held count as sent)", sent.Load(), len(data))
	}
	if staged.Size != int64(len(data)) || staged.SHA256 != hexSum(data) {
		t.Fatalf("staged: %+v", staged)
	}
	download(t, srv, ws, staged, data)

	t.Run("Committed", func(t *testing.T) {
		again, err := c.ResumeUpload(clientkit.Ctx(t), ws, id, f)
		if err != nil || again.FileID != staged.FileID {
			t.Fatalf("resume of a committed upload: got %+v, %v; want file %s", again, err, staged.FileID)
		}
		if n := rows(t, srv, ws); n != 1 {
			t.Fatalf("rows: %d, want 1", n)
		}
	})
	t.Run("Aborted", func(t *testing.T) {
		id := interrupted(t, c, proxy, ws, f, 1)
		if err := c.AbortUpload(clientkit.Ctx(t), ws, id); err != nil {
			t.Fatalf("abort: %v", err)
		}
		_, err := c.ResumeUpload(clientkit.Ctx(t), ws, id, f)
		if !errors.Is(err, client.ErrUploadGone) || !client.IsNotFound(err) {
			t.Fatalf("resume of an aborted upload: got %v, want ErrUploadGone", err)
		}
		if err := c.AbortUpload(clientkit.Ctx(t), ws, id); !client.IsNotFound(err) {
			t.Fatalf("abort again: got %v, want a 404", err)
		}
	})
	t.Run("Expired", func(t *testing.T) {
		id := interrupted(t, c, proxy, ws, f, 1)
		if _, err := srv.Pool.Exec(context.Background(), `UPDATE presigned_uploads SET expires_at = now() - interval '1 second' WHERE upload_id = $1`, id); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ResumeUpload(clientkit.Ctx(t), ws, id, f); !errors.Is(err, client.ErrUploadGone) {
			t.Fatalf("resume of an expired upload: got %v, want ErrUploadGone", err)
		}
	})
	if n := rows(t, srv, ws); n != 1 {
		t.Fatalf("rows at the end: %d, want 1", n)
	}
}

// TestPartURLsRenewed: a plan whose URLs are about to expire is renewed
// (a resume) before its parts go; the upload then completes.
func TestPartURLsRenewed(t *testing.T) {
	srv, _ := partsServer(t)
	var resumes atomic.Int32
	target, _ := url.Parse(srv.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/presign/") {
			resumes.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	defer api.Close()
	ws := uuid.New()
	c := clientkit.MustClient(t, api.URL, srv.AdminToken)
	data := clientkit.RandomBytes(11*mib, 23)
	f := client.BytesFile("big.bin", "", data)
	ups, err := c.Presign(clientkit.Ctx(t), ws, []client.UploadFile{f})
	if err != nil || ups[0].Multipart == nil {
		t.Fatalf("presign: %+v, %v", ups, err)
	}
	ups[0].ExpiresAt = time.Now().Add(30 * time.Second)
	if err := c.PutPresigned(clientkit.Ctx(t), ups[0], f); err != nil {
		t.Fatalf("put: %v", err)
	}
	if resumes.Load() != 1 {
		t.Errorf("resumes: %d, want 1 (the plan renewed once)", resumes.Load())
	}
	staged, err := c.Commit(clientkit.Ctx(t), ws, []uuid.UUID{ups[0].UploadID})
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	download(t, srv, ws, staged[0], data)
}

// TestResumeAfterACutCommitOnAnOlderServer: a server older than resumes
// of assembled uploads answers 404 to the resume of an upload whose parts
// a cut commit assembled; ResumeUpload then commits it. A commit cut
// again (503) is that 503, never ErrUploadGone: the upload is still
// there, and the next ResumeUpload commits it without sending a part.
// The file is the least in parts (5 MiB and 123 bytes: 2), as each cut
// commit waits out its budget (REQUEST_TIMEOUT and the bytes at
// pendinguploads.CopyRate).
func TestResumeAfterACutCommitOnAnOlderServer(t *testing.T) {
	proxy := s3test.StartPartProxy(t, s3test.MustStart(t).URL)
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"REQUEST_TIMEOUT": "1s",
		"MULTIPART_THRESHOLD_BYTES": fmt.Sprint(5 * mib), "MULTIPART_PART_BYTES": fmt.Sprint(5 * mib), "S3_ENDPOINT": proxy.URL}})
	target, _ := url.Parse(srv.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/presign/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"upload not found","code":"upload_not_found"}`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer older.Close()
	ws := uuid.New()
	c := clientkit.MustClient(t, older.URL, srv.AdminToken)
	c.Retry = client.RetryPolicy{MaxAttempts: 1}
	data := clientkit.RandomBytes(5*mib+123, 24)
	f := client.BytesFile("big.bin", "", data)
	var id uuid.UUID
	f.OnPresigned = func(p client.PresignedUpload) error { id = p.UploadID; return nil }
	proxy.SlowCopies(time.Minute, 0)
	if _, err := c.Upload(clientkit.Ctx(t), ws, []client.UploadFile{f}); !hasStatus(err, http.StatusServiceUnavailable) {
		t.Fatalf("upload whose commit is cut: got %v, want a 503", err)
	}
	f.OnPresigned = nil
	proxy.Reset()
	_, err := c.ResumeUpload(clientkit.Ctx(t), ws, id, f)
	if errors.Is(err, client.ErrUploadGone) || !hasStatus(err, http.StatusServiceUnavailable) {
		t.Fatalf("resume whose commit is cut again: got %v, want the 503, not ErrUploadGone", err)
	}
	proxy.SlowCopies(0, 0)
	staged, err := c.ResumeUpload(clientkit.Ctx(t), ws, id, f)
	if err != nil {
		t.Fatalf("resume with the bucket quick again: %v", err)
	}
	if got := proxy.Parts(); len(got) != 0 {
		t.Errorf("parts sent after the cut commit: %v, want none", got)
	}
	download(t, srv, ws, staged, data)
}

// hasStatus reports whether err is an *client.APIError of status.
func hasStatus(err error, status int) bool {
	var e *client.APIError
	return errors.As(err, &e) && e.Status == status
}
