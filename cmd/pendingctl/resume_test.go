package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// partsServer is the service with a bucket behind a PartProxy (its
// presigned URLs name the proxy), with env's settings.
func partsServer(t *testing.T, env map[string]string) (*apptest.Server, *s3test.PartProxy) {
	t.Helper()
	proxy := s3test.StartPartProxy(t, s3test.MustStart(t).URL)
	env["S3_ENDPOINT"] = proxy.URL
	return apptest.NewServer(t, apptest.Options{S3: true, Env: env}), proxy
}

// fastBytes is n pseudo-random bytes, quickly (100 MiB in a blink, even
// under -race).
func fastBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

// stopMidway runs the binary with args, lets done part PUTs through,
// and once the next one is held (the upload stalled mid-way) sends sig:
// os.Kill is a crash, os.Interrupt a Ctrl-C.
func stopMidway(t *testing.T, proxy *s3test.PartProxy, vars map[string]string, done int, sig os.Signal, args ...string) result {
	t.Helper()
	proxy.Hold(done)
	defer proxy.Unhold()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !proxy.WaitHeld(ctx, done) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the upload never stalled after %d parts; stderr: %s", done, errb.String())
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	return result{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
}

// states lists the state files in dir.
func states(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// readState reads the one state file in dir.
func readState(t *testing.T, dir string) uploadState {
	t.Helper()
	files := states(t, dir)
	if len(files) != 1 {
		t.Fatalf("state files: got %d, want 1", len(files))
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var st uploadState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state %s: %v", b, err)
	}
	return st
}

func rows(t *testing.T, srv *apptest.Server, ws uuid.UUID) int {
	t.Helper()
	var n int
	if err := srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pending_uploads WHERE workspace_id = $1`, ws).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// pulled downloads the workspace's one file and fails t unless it is
// want, byte for byte.
func pulled(t *testing.T, srv *apptest.Server, ws uuid.UUID, want []byte) {
	t.Helper()
	c, err := client.New(srv.URL, srv.WorkspaceToken(t, ws))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	files, err := c.List(ctx, ws)
	if err != nil || len(files) != 1 {
		t.Fatalf("list: %d files, %v; want 1", len(files), err)
	}
	var buf bytes.Buffer
	if _, err := c.Download(ctx, ws, files[0], &buf); err != nil {
		t.Fatalf("download: %v", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("download: %d bytes, not the %d uploaded", buf.Len(), len(want))
	}
}

// wantParts fails t unless the part PUTs of the first run and of the
// second are each of 1..count exactly once, first with done of them.
func wantParts(t *testing.T, first, second map[int]int, count, done int) {
	t.Helper()
	if len(first) != done {
		t.Errorf("part PUTs before the stop: got %v, want %d", first, done)
	}
	for n := 1; n <= count; n++ {
		if first[n]+second[n] != 1 {
			t.Errorf("part %d: PUT %d times before the stop and %d after, want once in all", n, first[n], second[n])
		}
	}
	if len(first)+len(second) != count {
		t.Errorf("parts: %v then %v, want %d in all", first, second, count)
	}
}

// TestUploadKilledResumes: pendingctl upload of a 24 MiB file (3 parts
// of 8 MiB, the server's defaults, the last 123 bytes short) killed with
// SIGKILL after 2 parts reached the bucket, then run again: only the
// missing part is PUT, exactly one file is staged, byte-exact, and the
// state file is gone. (The parts go at once, so either 2 may be first:
// each is 16.0 MiB held.)
func TestUploadKilledResumes(t *testing.T) {
	const size, parts, done = 3*(8<<20) - 123, 3, 2
	srv, proxy := partsServer(t, map[string]string{})
	ws := uuid.New()
	data := fastBytes(size, 1)
	paths, _ := fixture(t, map[string][]byte{"big.bin": data})
	stateDir := t.TempDir()
	vars := apiVars(srv, "", srv.AdminToken)
	args := []string{"upload", "--workspace", ws.String(), "--state", stateDir, paths[0]}

	r := stopMidway(t, proxy, vars, done, os.Kill, args...)
	if r.code != -1 {
		t.Fatalf("killed run: exit %d, want killed; stderr %s", r.code, r.stderr)
	}
	first := proxy.Parts()
	if st := readState(t, stateDir); st.Workspace != ws || st.Size != size || st.PartBytes != 8<<20 || st.UploadID == uuid.Nil {
		t.Fatalf("state: %+v", st)
	}
	if n := rows(t, srv, ws); n != 0 {
		t.Fatalf("rows after the kill: %d, want 0", n)
	}

	proxy.Reset()
	r = exe(t, vars, args...)
	expect(t, r, 0, "upload again")
	if !strings.Contains(r.stderr, "resuming the interrupted upload of "+paths[0]) || strings.Count(r.stdout, "staged ") != 1 {
		t.Errorf("rerun: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if want := fmt.Sprintf("%d of %d parts of %s (16.0 MiB of 24.0 MiB) are in the bucket already; sending the other %d", done, parts, paths[0], parts-done); !strings.Contains(r.stderr, want) {
		t.Errorf("rerun: stderr %q, want %q", r.stderr, want)
	}
	wantParts(t, first, proxy.Parts(), parts, done)
	if n := rows(t, srv, ws); n != 1 {
		t.Fatalf("rows: %d, want 1", n)
	}
	if s := states(t, stateDir); len(s) != 0 {
		t.Errorf("state files left: %v", s)
	}
	pulled(t, srv, ws, data)
}

// TestUploadInterrupted: Ctrl-C (SIGINT) stops an upload in parts
// cleanly, says how to resume, and leaves its state; the next run
// resumes it. A state whose upload the server aborted, or that expired,
// or of a file that changed since (its modification time, or only its
// bytes), starts over and says so; a state of
// an upload committed already (the process stopped before it could drop
// the state) answers the same file and sends nothing. Files of 21 MiB in
// parts of 5 MiB (5 parts).
func TestUploadInterrupted(t *testing.T) {
	const size, parts = 21<<20 + 123, 5
	srv, proxy := partsServer(t, map[string]string{"MULTIPART_THRESHOLD_BYTES": fmt.Sprint(5 << 20), "MULTIPART_PART_BYTES": fmt.Sprint(5 << 20)})
	vars := apiVars(srv, "", srv.AdminToken)
	admin, err := client.New(srv.URL, srv.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	// setup gives each case its workspace, file and state folder.
	setup := func(t *testing.T, seed byte) (uuid.UUID, string, []byte, string, []string) {
		ws := uuid.New()
		data := fastBytes(size, seed)
		paths, _ := fixture(t, map[string][]byte{"big.bin": data})
		dir := t.TempDir()
		return ws, paths[0], data, dir, []string{"upload", "--workspace", ws.String(), "--state", dir, paths[0]}
	}

	t.Run("CtrlC", func(t *testing.T) {
		ws, path, data, dir, args := setup(t, 2)
		r := stopMidway(t, proxy, vars, 2, os.Interrupt, args...)
		expect(t, r, 1, "interrupted upload")
		t.Logf("stderr of the interrupted run: %s", r.stderr)
		if !strings.Contains(r.stderr, "interrupted") || !strings.Contains(r.stderr, "the upload of "+path+" can be resumed: run the same command again") {
			t.Errorf("stderr: %q", r.stderr)
		}
		first := proxy.Parts()
		readState(t, dir)
		proxy.Reset()
		r = exe(t, vars, args...)
		expect(t, r, 0, "upload again")
		if want := "2 of 5 parts of " + path + " (10.0 MiB of 21.0 MiB) are in the bucket already; sending the other 3"; !strings.Contains(r.stderr, want) {
			t.Errorf("stderr of the resumed run: got %q, want %q", r.stderr, want)
		}
		wantParts(t, first, proxy.Parts(), parts, 2)
		if n := rows(t, srv, ws); n != 1 {
			t.Fatalf("rows: %d, want 1", n)
		}
		pulled(t, srv, ws, data)
	})

	for _, tc := range []struct {
		name   string
		refuse func(t *testing.T, ws uuid.UUID, st uploadState, path string)
		say    string
	}{
		{"Aborted", func(t *testing.T, ws uuid.UUID, st uploadState, _ string) {
			if err := admin.AbortUpload(context.Background(), ws, st.UploadID); err != nil {
				t.Fatal(err)
			}
		}, "the server no longer has the interrupted upload of %s (it expired or was aborted): starting over"},
		{"Expired", func(t *testing.T, _ uuid.UUID, st uploadState, _ string) {
			if _, err := srv.Pool.Exec(context.Background(), `UPDATE presigned_uploads SET expires_at = now() - interval '1 second' WHERE upload_id = $1`, st.UploadID); err != nil {
				t.Fatal(err)
			}
		}, "the server no longer has the interrupted upload of %s (it expired or was aborted): starting over"},
		{"FileChanged", func(t *testing.T, _ uuid.UUID, _ uploadState, path string) {
			later := time.Now().Add(time.Minute)
			if err := os.Chtimes(path, later, later); err != nil {
				t.Fatal(err)
			}
		}, "%s changed since its interrupted upload: starting over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, path, data, dir, args := setup(t, 3)
			stopMidway(t, proxy, vars, 1, os.Interrupt, args...)
			st := readState(t, dir)
			tc.refuse(t, ws, st, path)
			proxy.Reset()
			r := exe(t, vars, args...)
			expect(t, r, 0, "upload again")
			if want := fmt.Sprintf(tc.say, path); !strings.Contains(r.stderr, want) {
				t.Errorf("stderr: got %q, want %q", r.stderr, want)
			}
			if got := proxy.Parts(); len(got) != parts {
				t.Errorf("parts sent again: %v, want all %d", got, parts)
			}
			if n := rows(t, srv, ws); n != 1 {
				t.Fatalf("rows: %d, want 1", n)
			}
			if s := states(t, dir); len(s) != 0 {
				t.Errorf("state files left: %v", s)
			}
			pulled(t, srv, ws, data)
		})
	}

	t.Run("FileChangedInPlace", func(t *testing.T) {
		ws, path, _, dir, args := setup(t, 5)
		stopMidway(t, proxy, vars, 1, os.Interrupt, args...)
		// Other bytes, the same size and modification time: the state
		// matches, the bucket's parts do not.
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		data := fastBytes(size, 6)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		r := exe(t, vars, args...)
		expect(t, r, 0, "upload again")
		if want := "the interrupted upload of " + path + " does not hold the file's bytes (was it changed in place?): starting over"; !strings.Contains(r.stderr, want) {
			t.Errorf("stderr: got %q, want %q", r.stderr, want)
		}
		if n := rows(t, srv, ws); n != 1 {
			t.Fatalf("rows: %d, want 1", n)
		}
		if s := states(t, dir); len(s) != 0 {
			t.Errorf("state files left: %v", s)
		}
		pulled(t, srv, ws, data)
	})

	t.Run("CommittedBefore", func(t *testing.T) {
		ws, _, data, dir, args := setup(t, 4)
		stopMidway(t, proxy, vars, 1, os.Interrupt, args...)
		file := states(t, dir)[0]
		saved, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		first := exe(t, vars, append(args, "--json")...)
		expect(t, first, 0, "upload again")
		// As if that run had died between its commit and dropping the state.
		if err := os.WriteFile(file, saved, 0o600); err != nil {
			t.Fatal(err)
		}
		proxy.Reset()
		again := exe(t, vars, append(args, "--json")...)
		expect(t, again, 0, "upload with the state of a committed upload")
		if again.stdout != first.stdout {
			t.Errorf("answer: got %q, want the committed file again, %q", again.stdout, first.stdout)
		}
		if got := proxy.Parts(); len(got) != 0 {
			t.Errorf("parts sent: %v, want none", got)
		}
		if n := rows(t, srv, ws); n != 1 {
			t.Fatalf("rows: %d, want 1", n)
		}
		if s := states(t, dir); len(s) != 0 {
			t.Errorf("state files left: %v", s)
		}
		pulled(t, srv, ws, data)
	})
}

// TestUploadCommitCutResumes: the commit of an upload in parts cut by its
// deadline (every CopyObject answers later than the commit's budget,
// REQUEST_TIMEOUT=1s, the least the service takes, plus the 5 MiB at
// pendinguploads.CopyRate) after
// S3 assembled the parts: pendingctl upload fails (503, each of the
// client's tries), says the upload can be resumed, and keeps its state.
// Run again with the bucket still slow, it resumes with every part in the
// bucket and none to send, fails the commit again, and never says the
// server lost the upload (it did not). Run a third time with the bucket
// quick again, it commits: one file, byte-exact, no part sent after the
// first run. The file is the least in parts (2: 5 MiB, S3's least part,
// and 123 bytes), as each cut commit waits out its whole budget, on each
// of the client's tries.
func TestUploadCommitCutResumes(t *testing.T) {
	const size, parts = 5<<20 + 123, 2
	srv, proxy := partsServer(t, map[string]string{"REQUEST_TIMEOUT": "1s",
		"MULTIPART_THRESHOLD_BYTES": fmt.Sprint(5 << 20), "MULTIPART_PART_BYTES": fmt.Sprint(5 << 20)})
	ws := uuid.New()
	data := fastBytes(size, 7)
	paths, _ := fixture(t, map[string][]byte{"big.bin": data})
	stateDir := t.TempDir()
	vars := apiVars(srv, "", srv.AdminToken)
	args := []string{"upload", "--workspace", ws.String(), "--state", stateDir, paths[0]}
	proxy.SlowCopies(time.Minute, 0)

	r := exe(t, vars, args...)
	expect(t, r, 1, "upload whose commit is cut")
	if !strings.Contains(r.stderr, "503") || !strings.Contains(r.stderr, "the upload of "+paths[0]+" can be resumed") {
		t.Errorf("first run: stderr %q, want the 503 and how to resume", r.stderr)
	}
	if got := proxy.Parts(); len(got) != parts {
		t.Fatalf("parts of the first run: %v, want %d", got, parts)
	}
	readState(t, stateDir)

	proxy.Reset()
	r = exe(t, vars, args...)
	expect(t, r, 1, "resume whose commit is cut again")
	t.Logf("stderr of the second run: %s", r.stderr)
	if strings.Contains(r.stderr, "no longer has") || strings.Contains(r.stderr, "starting over") {
		t.Errorf("second run: stderr %q says the upload is gone; it is not", r.stderr)
	}
	if want := fmt.Sprintf("all %d parts of %s (5.0 MiB) are in the bucket already; committing", parts, paths[0]); !strings.Contains(r.stderr, want) {
		t.Errorf("second run: stderr %q, want %q", r.stderr, want)
	}
	if got := proxy.Parts(); len(got) != 0 {
		t.Errorf("parts sent again by the second run: %v, want none", got)
	}
	readState(t, stateDir)
	if n := rows(t, srv, ws); n != 0 {
		t.Fatalf("rows after two cut commits: %d, want 0", n)
	}

	proxy.SlowCopies(0, 0)
	r = exe(t, vars, args...)
	expect(t, r, 0, "resume with the bucket quick again")
	if strings.Count(r.stdout, "staged ") != 1 {
		t.Errorf("third run: stdout %q, want one file staged", r.stdout)
	}
	if got := proxy.Parts(); len(got) != 0 {
		t.Errorf("parts sent again by the third run: %v, want none", got)
	}
	if s := states(t, stateDir); len(s) != 0 {
		t.Errorf("state files left: %v", s)
	}
	if n := rows(t, srv, ws); n != 1 {
		t.Fatalf("rows: %d, want 1", n)
	}
	pulled(t, srv, ws, data)
}
