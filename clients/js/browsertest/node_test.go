package browsertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// TestNodeUploads: the client works in node (package.json's engines), as
// scripts and the platform's services would call it, against the real
// service (Postgres, moto): three files read from disk as they go, one
// staged by multipart, one over the request cap by a presigned PUT, one
// over the multipart threshold in parts, with progress that never goes
// back and ends at their total; each read back byte-exact by
// downloadFile and by a download link openFile returns (no document, so
// no navigation), and acked. node has no XMLHttpRequest: the transfers go
// by fetch, streamed, with their Content-Length.
func TestNodeUploads(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node test: node is missing (scripts/ensure-tools.sh installs it)")
		}
		t.Skip("node test: node is missing (scripts/ensure-tools.sh installs it)")
	}
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{
		"MULTIPART_THRESHOLD_BYTES": "5242880", // S3's least part: the file in parts is 11 MiB, three parts
		"MULTIPART_PART_BYTES":      "5242880",
	}})
	ws := uuid.New()
	token := srv.WorkspaceToken(t, ws)

	dir := t.TempDir()
	rng := rand.NewChaCha8([32]byte{45, 8})
	want := map[string][]byte{}
	var paths []string
	for _, f := range []struct {
		name string
		size int
	}{{"small.txt", 1 << 10}, {"over-the-request-cap.bin", 6 << 20}, {"in-parts.bin", 11 << 20}} {
		b := make([]byte, f.size)
		_, _ = rng.Read(b)
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		want[f.name] = b
		paths = append(paths, p)
	}
	args, _ := json.Marshal(map[string]any{"api": srv.URL, "token": token, "ws": ws.String(), "paths": paths})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "node_upload.mjs"))
	cmd.Env = append(os.Environ(), "NODE_UPLOAD="+string(args))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node testdata/node_upload.mjs: %v\n%s%s", err, out, stderr.Bytes())
	}
	var got struct {
		Staged []struct {
			FileID string `json:"file_id"`
			Name   string
			Size   int
			SHA256 string
		}
		Progress struct {
			Last, Total, Calls int
			Backwards          bool
		}
		Read []struct {
			Name, SHA256, LinkSHA256 string
			Size, LinkStatus         int
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node's answer: %v\n%s", err, out)
	}
	sum := 0
	for _, b := range want {
		sum += len(b)
	}
	if len(got.Staged) != 3 || len(got.Read) != 3 {
		t.Fatalf("node: staged %d, read %d; want 3 each:\n%s", len(got.Staged), len(got.Read), out)
	}
	for i, f := range got.Staged {
		s := sha256.Sum256(want[f.Name])
		if f.Size != len(want[f.Name]) || f.SHA256 != hex.EncodeToString(s[:]) {
			t.Errorf("staged %s: size %d sha256 %s, want %d %x", f.Name, f.Size, f.SHA256, len(want[f.Name]), s)
		}
		r := got.Read[i]
		if r.Name != f.Name || r.SHA256 != f.SHA256 || r.LinkStatus != 200 || r.LinkSHA256 != f.SHA256 {
			t.Errorf("read back %s: %+v, want its bytes by downloadFile and by the link", f.Name, r)
		}
	}
	if p := got.Progress; p.Backwards || p.Last != sum || p.Total != sum || p.Calls < 3 {
		t.Errorf("progress: %+v; want it never to go back, %d calls or more, ending at the total %d", p, 3, sum)
	}
	// Each path was the one its size calls for: in parts (3), one PUT, inline.
	if n := sqlInt(t, srv, `SELECT count(*) FROM pending_uploads WHERE workspace_id = $1 AND s3_key IS NOT NULL`, ws); n != 2 {
		t.Errorf("files in the bucket: got %d, want 2 (the presigned one and the one in parts)", n)
	}
}

func sqlInt(t *testing.T, srv *apptest.Server, q string, args ...any) int {
	t.Helper()
	var n int
	if err := srv.App.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
