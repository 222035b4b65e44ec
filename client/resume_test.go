package client_test

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/internal/apptest"
)

// TestPullResumesAPartialDownload: a pull stopped half way leaves the first
// bytes in <file_id>.part; the next pull asks only for the rest (Range),
// verifies the whole file against the list's SHA-256, places it byte-exact
// and acks it. A part whose bytes are not the file's is refused, not
// placed, and a later pull starts afresh. Inline and bucket files alike
// (the bucket's through the redirect, Range and all).
func TestPullResumesAPartialDownload(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{S3: true})
	var mu sync.Mutex
	var ranges []string
	target, _ := url.Parse(srv.URL)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ranges = append(ranges, r.Header.Get("Range"))
		mu.Unlock()
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	admin := mustClient(t, srv.URL, srv.AdminToken)
	ctx := ctxT(t)
	for name, size := range map[string]int{"Inline": 100 << 10, "Bucket": 3 << 20} {
		t.Run(name, func(t *testing.T) {
			ws := uuid.New()
			wsc := mustClient(t, proxy.URL, srv.WorkspaceToken(t, ws))
			data := make([]byte, size)
			rand.Read(data)
			staged, err := admin.Upload(ctx, ws, []client.UploadFile{client.BytesFile("r.bin", "", data)})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			state := filepath.Join(dir, client.StateDirName)
			must(t, os.Mkdir(state, 0o700))
			part := filepath.Join(state, staged[0].FileID.String()+".part")
			must(t, os.WriteFile(part, data[:size/3], 0o600))
			mu.Lock()
			ranges = nil
			mu.Unlock()
			res, err := client.NewPuller(wsc, ws, dir).Pull(ctx)
			if err != nil || len(res.Delivered) != 1 || !res.Delivered[0].Acked {
				t.Fatalf("pull: got %+v, %v", res, err)
			}
			if got := apptest.DirFiles(t, dir, client.StateDirName)["r.bin"]; !bytes.Equal(got, data) {
				t.Fatalf("r.bin: got %d bytes, want the file's %d", len(got), size)
			}
			mu.Lock()
			defer mu.Unlock()
			want := "bytes=" + itoa(size/3) + "-"
			found := false
			for _, r := range ranges {
				found = found || r == want
			}
			if !found {
				t.Fatalf("Range headers sent: %q, want %q", ranges, want)
			}
		})
	}
	t.Run("WrongPartRefused", func(t *testing.T) {
		ws := uuid.New()
		wsc := mustClient(t, srv.URL, srv.WorkspaceToken(t, ws))
		data := []byte("the real bytes of the file")
		staged, err := admin.Upload(ctx, ws, []client.UploadFile{client.BytesFile("w.txt", "", data)})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		state := filepath.Join(dir, client.StateDirName)
		must(t, os.Mkdir(state, 0o700))
		must(t, os.WriteFile(filepath.Join(state, staged[0].FileID.String()+".part"), []byte("THE"), 0o600))
		if _, err := client.NewPuller(wsc, ws, dir).Pull(ctx); err == nil {
			t.Fatal("a part of other bytes was resumed without an error")
		}
		if got := apptest.DirFiles(t, dir, client.StateDirName); len(got) != 0 {
			t.Fatalf("placed %v from a wrong part", keys(got))
		}
		res, err := client.NewPuller(wsc, ws, dir).Pull(ctx)
		if err != nil || len(res.Delivered) != 1 {
			t.Fatalf("the pull after: got %+v, %v", res, err)
		}
		if got := apptest.DirFiles(t, dir, client.StateDirName)["w.txt"]; !bytes.Equal(got, data) {
			t.Fatalf("w.txt: got %q", got)
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }
