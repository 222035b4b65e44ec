package inbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/client/inbox"
	"github.com/pendinguploads/pendinguploads/internal/clienttest/clientkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

func stateEntries(t *testing.T, dir string) []string {
	ents, _ := os.ReadDir(filepath.Join(dir, inbox.StateDirName))
	var out []string
	for _, e := range ents {
		if e.Name() != "lock" {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func TestPullDeliversAndAcks(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	admin := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	wsc := clientkit.MustClient(t, srv.URL, srv.WorkspaceToken(t, ws))
	ctx := clientkit.Ctx(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "same.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	one, two, three := []byte("one"), []byte("two"), clientkit.RandomBytes(70000, 9)
	if _, err := admin.Upload(ctx, ws, []client.UploadFile{
		client.BytesFile("same.txt", "", one), client.BytesFile("same.txt", "", two),
		client.BytesFile("../../etc/x y.bin", "", three),
	}); err != nil {
		t.Fatal(err)
	}
	res, err := inbox.New(wsc, ws, dir).Pull(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Delivered) != 3 || res.Listed != 3 || res.Remaining != 0 {
		t.Fatalf("got %+v", res)
	}
	for _, d := range res.Delivered {
		if !d.Acked {
			t.Errorf("%s: not acked", d.Path)
		}
	}
	got := apptest.DirFiles(t, dir, inbox.StateDirName)
	if len(got) != 4 || string(got["same.txt"]) != "mine" || !bytes.Equal(got["x_y.bin"], three) {
		t.Fatalf("files: got %d: %v", len(got), keys(got))
	}
	if !(string(got["same-1.txt"]) == "one" && string(got["same-2.txt"]) == "two" ||
		string(got["same-1.txt"]) == "two" && string(got["same-2.txt"]) == "one") {
		t.Fatalf("same-1/same-2: got %q, %q", got["same-1.txt"], got["same-2.txt"])
	}
	if st := stateEntries(t, dir); len(st) != 0 {
		t.Fatalf("state left: %v", st)
	}
	res, err = inbox.New(wsc, ws, dir).Pull(ctx)
	if err != nil || len(res.Delivered) != 0 || res.Listed != 0 || res.Remaining != 0 {
		t.Fatalf("second pull: got %+v, %v; want nothing", res, err)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// onAck serves srv through a proxy that hands each ack request to ack
// instead (which may answer it, or pass it on with next).
func onAck(t *testing.T, srv *apptest.Server, ack func(w http.ResponseWriter, r *http.Request, next http.Handler)) string {
	t.Helper()
	target, _ := url.Parse(srv.URL)
	next := httputil.NewSingleHostReverseProxy(target)
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/ack") {
			ack(w, r, next)
			return
		}
		next.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p.URL
}

// TestPullStoppedBeforeAck: a pull that stops after writing and before
// acking (its ack refused, 401: the pull stops there) is finished by the
// next one: exactly one copy, acked.
func TestPullStoppedBeforeAck(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	admin := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	tok := srv.WorkspaceToken(t, ws)
	wsc := clientkit.MustClient(t, srv.URL, tok)
	ctx := clientkit.Ctx(t)
	dir := t.TempDir()
	data := clientkit.RandomBytes(3000, 10)
	if _, err := admin.Upload(ctx, ws, []client.UploadFile{client.BytesFile("a.bin", "", data)}); err != nil {
		t.Fatal(err)
	}
	refusing := clientkit.MustClient(t, onAck(t, srv, func(w http.ResponseWriter, _ *http.Request, _ http.Handler) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":"invalid workspace auth token","code":"invalid_token"}` + "\n"))
	}), tok)
	if _, err := inbox.New(refusing, ws, dir).Pull(ctx); !client.IsUnauthorized(err) {
		t.Fatalf("got %v, want the refused ack", err)
	}
	if files, _ := wsc.List(ctx, ws); len(files) != 1 {
		t.Fatalf("after the crash: %d pending, want 1 (unacked)", len(files))
	}
	if got := apptest.DirFiles(t, dir, inbox.StateDirName); !bytes.Equal(got["a.bin"], data) || len(got) != 1 {
		t.Fatalf("after the crash: got %v", keys(got))
	}
	res, err := inbox.New(wsc, ws, dir).Pull(ctx)
	if err != nil || len(res.Delivered) != 1 || !res.Delivered[0].Recovered || !res.Delivered[0].Acked {
		t.Fatalf("second pull: got %+v, %v", res, err)
	}
	if got := apptest.DirFiles(t, dir, inbox.StateDirName); len(got) != 1 {
		t.Fatalf("copies: got %v, want one", keys(got))
	}
	if files, _ := wsc.List(ctx, ws); len(files) != 0 {
		t.Fatalf("pending after recovery: %d, want 0", len(files))
	}
}

// TestPullRecoveryStates builds the states a crash can leave between the
// record and the removal of the .part, and checks each is finished with
// one copy.
func TestPullRecoveryStates(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	admin := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	ctx := clientkit.Ctx(t)
	for _, tc := range []struct {
		name  string
		setup func(dir, part, final string)
		want  map[string]string
	}{
		{"BeforeLink", func(dir, part, final string) {}, map[string]string{"r.txt": "data"}},
		{"LinkedNotCleaned", func(dir, part, final string) { must(t, os.Link(part, final)) }, map[string]string{"r.txt": "data"}},
		{"NameTakenMeanwhile", func(dir, part, final string) { must(t, os.WriteFile(final, []byte("other"), 0o600)) },
			map[string]string{"r.txt": "other", "r-1.txt": "data"}},
		{"PlacedNotAcked", func(dir, part, final string) { must(t, os.Rename(part, final)) }, map[string]string{"r.txt": "data"}},
		{"PartWithoutRecord", nil, map[string]string{"r.txt": "data"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := uuid.New()
			wsc := clientkit.MustClient(t, srv.URL, srv.WorkspaceToken(t, ws))
			staged, err := admin.Upload(ctx, ws, []client.UploadFile{client.BytesFile("r.txt", "", []byte("data"))})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			state := filepath.Join(dir, inbox.StateDirName)
			must(t, os.Mkdir(state, 0o700))
			id := staged[0].FileID.String()
			part := filepath.Join(state, id+".part")
			must(t, os.WriteFile(part, []byte("data"), 0o600))
			if tc.setup != nil {
				rec := `{"file_id":"` + id + `","name":"r.txt","final":"r.txt","size":4}`
				must(t, os.WriteFile(filepath.Join(state, id+".record"), []byte(rec), 0o600))
				tc.setup(dir, part, filepath.Join(dir, "r.txt"))
			} else {
				must(t, os.WriteFile(part, []byte("dat"), 0o600)) // a download cut short
			}
			res, err := inbox.New(wsc, ws, dir).Pull(ctx)
			if err != nil || len(res.Delivered) != 1 || !res.Delivered[0].Acked {
				t.Fatalf("pull: got %+v, %v", res, err)
			}
			got := apptest.DirFiles(t, dir, inbox.StateDirName)
			if len(got) != len(tc.want) {
				t.Fatalf("files: got %v, want %v", keys(got), tc.want)
			}
			for k, v := range tc.want {
				if string(got[k]) != v {
					t.Fatalf("%s: got %q, want %q", k, got[k], v)
				}
			}
			if st := stateEntries(t, dir); len(st) != 0 {
				t.Fatalf("state left: %v", st)
			}
			if files, _ := wsc.List(ctx, ws); len(files) != 0 {
				t.Fatalf("pending: %d, want 0", len(files))
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestPullRefusesTamperedBytes(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	admin := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	tok := srv.WorkspaceToken(t, ws)
	ctx := clientkit.Ctx(t)
	if _, err := admin.Upload(ctx, ws, []client.UploadFile{client.BytesFile("t.bin", "", clientkit.RandomBytes(4000, 11))}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := clientkit.MustClient(t, apptest.TamperProxy(t, srv.URL, true, nil), tok)
	res, err := inbox.New(c, ws, dir).Pull(ctx)
	if !errors.Is(err, client.ErrIntegrity) || len(res.Delivered) != 0 || len(res.Errors) != 1 || res.Listed != 1 || res.Remaining != 1 {
		t.Fatalf("got %+v, %v; want one integrity error, the file still pending", res, err)
	}
	if got := apptest.DirFiles(t, dir, inbox.StateDirName); len(got) != 0 {
		t.Fatalf("files: got %v, want none", keys(got))
	}
	if st := stateEntries(t, dir); len(st) != 0 {
		t.Fatalf("state left: %v", st)
	}
	if files, _ := admin.List(ctx, ws); len(files) != 1 {
		t.Fatalf("pending: %d, want 1 (not acked)", len(files))
	}
}

func TestPullLocked(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	wsc := clientkit.MustClient(t, srv.URL, tok)
	dir := t.TempDir()
	inner := make(chan error, 1)
	// Hold the lock from a first pull (at its ack) while a second one tries.
	holding := clientkit.MustClient(t, onAck(t, srv, func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		_, err := inbox.New(wsc, ws, dir).Pull(clientkit.Ctx(t))
		inner <- err
		next.ServeHTTP(w, r)
	}), tok)
	admin := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	if _, err := admin.Upload(clientkit.Ctx(t), ws, []client.UploadFile{client.BytesFile("l.txt", "", []byte("x"))}); err != nil {
		t.Fatal(err)
	}
	if _, err := inbox.New(holding, ws, dir).Pull(clientkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-inner; !errors.Is(err, inbox.ErrLocked) {
		t.Fatalf("second pull: got %v, want ErrLocked", err)
	}
}

// TestPullResumesPart: a .part holding the first bytes of a pending
// upload (left by a pull that was killed) is resumed: the next pull asks
// only for the rest (Range: bytes=<have>-), inline or from the bucket
// (the Range follows the redirect), places the whole file byte-exact and
// acks it. A part whose bytes are not the file's fails the SHA-256 of the
// whole file: an integrity error, the part deleted, the upload unacked,
// and the pull after it delivers the file whole. A server that ignores
// Range (200, the whole file) has the part started over.
func TestPullResumesPart(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"INLINE_MAX_BYTES": "100000"}})
	var ranges sync.Map      // file id → the Range header of its content request
	var ignoreRange sync.Map // workspace ids whose content requests lose their Range
	target, _ := url.Parse(srv.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/content") {
			parts := strings.Split(r.URL.Path, "/")
			ranges.Store(parts[len(parts)-2], r.Header.Get("Range"))
			if _, ok := ignoreRange.Load(parts[2]); ok {
				r.Header.Del("Range")
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	admin := clientkit.MustClient(t, srv.URL, srv.AdminToken)
	ctx := clientkit.Ctx(t)
	for _, tc := range []struct {
		name    string
		size    int
		have    int
		corrupt bool
		// ignore: the server answers the whole file, as if it ignored Range.
		ignore bool
	}{
		{"inline", 90000, 33333, false, false},
		{"bucket", 3 << 20, 1<<20 + 7, false, false},
		{"inline corrupt part", 90000, 1000, true, false},
		{"bucket corrupt part", 3 << 20, 1000, true, false},
		{"inline Range ignored", 90000, 33333, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := uuid.New()
			wsc := clientkit.MustClient(t, proxy.URL, srv.WorkspaceToken(t, ws))
			if tc.ignore {
				ignoreRange.Store(ws.String(), true)
			}
			data := clientkit.RandomBytes(tc.size, uint64(tc.size+tc.have))
			staged, err := admin.Upload(ctx, ws, []client.UploadFile{client.BytesFile("r.bin", "", data)})
			if err != nil {
				t.Fatal(err)
			}
			id := staged[0].FileID.String()
			dir := t.TempDir()
			state := filepath.Join(dir, inbox.StateDirName)
			if err := os.Mkdir(state, 0o700); err != nil {
				t.Fatal(err)
			}
			part := bytes.Clone(data[:tc.have])
			if tc.corrupt {
				part[0] ^= 0xff
			}
			if err := os.WriteFile(filepath.Join(state, id+".part"), part, 0o600); err != nil {
				t.Fatal(err)
			}
			puller := inbox.New(wsc, ws, dir)
			shown := &countingProgress{}
			puller.Progress = func(client.File) inbox.Progress { return shown }
			res, err := puller.Pull(ctx)
			if got, _ := ranges.Load(id); got != fmt.Sprintf("bytes=%d-", tc.have) {
				t.Errorf("content request: Range %q, want bytes=%d-", got, tc.have)
			}
			if tc.corrupt {
				if !errors.Is(err, client.ErrIntegrity) || len(res.Delivered) != 0 {
					t.Fatalf("pull with a corrupt part: got %+v, %v; want an integrity error", res, err)
				}
				if st := stateEntries(t, dir); len(st) != 0 {
					t.Fatalf("state after the integrity error: %v, want the part deleted", st)
				}
				if files, _ := wsc.List(ctx, ws); len(files) != 1 {
					t.Fatalf("after the integrity error: %d pending, want 1", len(files))
				}
				res, err = inbox.New(wsc, ws, dir).Pull(ctx)
				if got, _ := ranges.Load(id); got != "" {
					t.Errorf("pull after the deleted part: Range %q, want none", got)
				}
			}
			if err != nil || len(res.Delivered) != 1 || !res.Delivered[0].Acked {
				t.Fatalf("pull: got %+v, %v; want the file delivered and acked", res, err)
			}
			if !tc.corrupt && !tc.ignore && shown.n != tc.size {
				t.Errorf("progress: shown %d bytes, want the file's %d (the part's and the rest)", shown.n, tc.size)
			}
			if got := apptest.DirFiles(t, dir, inbox.StateDirName); len(got) != 1 || !bytes.Equal(got["r.bin"], data) {
				t.Fatalf("files: got %v (r.bin %d bytes), want r.bin byte-exact (%d)", keys(got), len(got["r.bin"]), len(data))
			}
			if st := stateEntries(t, dir); len(st) != 0 {
				t.Fatalf("state left: %v", st)
			}
			if files, _ := wsc.List(ctx, ws); len(files) != 0 {
				t.Fatalf("after the pull: %d pending, want 0 (acked)", len(files))
			}
		})
	}
}

// TestPullDropsStalePart: a .part of an upload the list no longer shows
// (acked elsewhere, expired, swept) is deleted by the next pull.
func TestPullDropsStalePart(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	wsc := clientkit.MustClient(t, srv.URL, srv.WorkspaceToken(t, ws))
	dir := t.TempDir()
	state := filepath.Join(dir, inbox.StateDirName)
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(state, uuid.NewString()+".part")
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := inbox.New(wsc, ws, dir).Pull(clientkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if st := stateEntries(t, dir); len(st) != 0 {
		t.Fatalf("state left: %v, want the stale part deleted", st)
	}
}

// countingProgress counts the bytes a transfer shows.
type countingProgress struct{ n int }

func (p *countingProgress) Write(b []byte) (int, error) { p.n += len(b); return len(b), nil }
func (p *countingProgress) Done(error)                  {}
