package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/client/inbox"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/migrations"
)

func TestMain(m *testing.M) { testkit.Main(m) }

type result struct {
	stdout, stderr string
	code           int
}

// cli runs pendingctl in this process with exactly the environment vars.
func cli(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, args, func(k string) string { return vars[k] }, &out, &errb)
	return result{out.String(), errb.String(), code}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds pendingctl once per test binary.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pendingctl-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "pendingctl")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return binPath
}

// exe runs the built binary with exactly the environment vars (and PATH).
func exe(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

// randomBytes is n pseudo-random bytes of seed, from ChaCha8 in one Read:
// a byte at a time, 20 MiB cost seconds under -race.
func randomBytes(n int, seed uint64) []byte {
	var key [32]byte
	for i := range 8 {
		key[i] = byte(seed >> (8 * i))
	}
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

// fixture writes files into a temp folder and returns their paths and bytes.
func fixture(t *testing.T, files map[string][]byte) ([]string, map[string][]byte) {
	dir := t.TempDir()
	var paths []string
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths, files
}

func unacked(t *testing.T, srv *apptest.Server, ws uuid.UUID) int {
	t.Helper()
	var n int
	err := srv.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM pending_uploads WHERE workspace_id = $1 AND acked_at IS NULL`, ws).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func apiVars(srv *apptest.Server, url, token string) map[string]string {
	if url == "" {
		url = srv.URL
	}
	return map[string]string{"PENDINGUPLOADS_API": url, "PENDINGUPLOADS_TOKEN": token}
}

func expect(t *testing.T, r result, code int, what string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, r.code, code, r.stdout, r.stderr)
	}
}

// TestUploadPullLs: several files, a 20 MiB one among them, uploaded with
// pendingctl and pulled with pendingctl: identical bytes, all acked, ls
// empty after. Three servers: bytes in Postgres with a raised request cap
// (the 20 MiB file goes multipart), and a bucket on moto (it goes presign +
// PUT + commit, and comes back through a 307).
func TestUploadPullLs(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts apptest.Options
	}{
		{"PostgresRaisedCap", apptest.Options{Env: map[string]string{"MAX_REQUEST_BYTES": "33554432"}}},
		{"S3Presigned", apptest.Options{S3: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := apptest.NewServer(t, tc.opts)
			ws := uuid.New()
			wsTok := srv.WorkspaceToken(t, ws)
			paths, want := fixture(t, map[string][]byte{
				"small.txt":           []byte("hello, workspace\n"),
				"name with space.pdf": randomBytes(300<<10, 1),
				"mid.bin":             randomBytes(5<<20, 2),
				"big.bin":             randomBytes(20<<20, 3),
			})
			up := cli(t, apiVars(srv, "", srv.AdminToken), append([]string{"upload", "--workspace", ws.String(), "--json"}, paths...)...)
			expect(t, up, 0, "upload")
			var staged struct{ Files []client.StagedFile }
			if err := json.Unmarshal([]byte(up.stdout), &staged); err != nil || len(staged.Files) != 4 {
				t.Fatalf("upload --json: got %q, %v", up.stdout, err)
			}

			ls := cli(t, apiVars(srv, "", wsTok), "ls", "--workspace", ws.String())
			expect(t, ls, 0, "ls")
			if !strings.Contains(ls.stdout, "name_with_space.pdf") || strings.Count(ls.stdout, "\n") != 5 {
				t.Fatalf("ls: got %q", ls.stdout)
			}

			dir := filepath.Join(t.TempDir(), "inbox")
			pull := cli(t, apiVars(srv, "", wsTok), "pull", "--workspace", ws.String(), "--dir", dir, "--once", "--json")
			expect(t, pull, 0, "pull")
			var pr struct {
				Listed    *int
				Remaining *int
				Delivered []inbox.Delivery
				Errors    []any
			}
			if err := json.Unmarshal([]byte(pull.stdout), &pr); err != nil || len(pr.Delivered) != 4 || len(pr.Errors) != 0 {
				t.Fatalf("pull --json: got %q, %v", pull.stdout, err)
			}
			// Four listed, none left: not an ambiguous "pending":4.
			if pr.Listed == nil || *pr.Listed != 4 || pr.Remaining == nil || *pr.Remaining != 0 || strings.Contains(pull.stdout, `"pending"`) {
				t.Errorf("pull --json: got %q, want \"listed\":4 and \"remaining\":0", pull.stdout)
			}
			got := apptest.DirFiles(t, dir, inbox.StateDirName)
			wantNames := map[string]string{"small.txt": "small.txt", "name_with_space.pdf": "name with space.pdf", "mid.bin": "mid.bin", "big.bin": "big.bin"}
			if len(got) != len(wantNames) {
				t.Fatalf("inbox: got %d files, want %d", len(got), len(wantNames))
			}
			for disk, orig := range wantNames {
				if !bytes.Equal(got[disk], want[orig]) {
					t.Fatalf("%s: bytes differ (got %d, want %d bytes)", disk, len(got[disk]), len(want[orig]))
				}
			}
			if n := unacked(t, srv, ws); n != 0 {
				t.Fatalf("unacked: got %d, want 0", n)
			}
			expect(t, cli(t, apiVars(srv, "", wsTok), "ls", "--workspace", ws.String()), 3, "ls after pull")
			lsj := cli(t, apiVars(srv, "", wsTok), "ls", "--workspace", ws.String(), "--json")
			expect(t, lsj, 3, "ls --json after pull")
			if strings.TrimSpace(lsj.stdout) != `{"uploads":[]}` {
				t.Fatalf("ls --json: got %q", lsj.stdout)
			}
			expect(t, cli(t, apiVars(srv, "", wsTok), "pull", "--workspace", ws.String(), "--dir", dir), 3, "second pull")
			for _, r := range []result{up, ls, pull, lsj} {
				if strings.Contains(r.stdout+r.stderr, wsTok) || strings.Contains(r.stdout+r.stderr, srv.AdminToken) {
					t.Fatalf("a token was printed")
				}
			}
		})
	}
}

// TestUploadTooLargeForServer: without a bucket and with the default cap,
// a 20 MiB file is refused with a message that says why.
func TestUploadTooLargeForServer(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	paths, _ := fixture(t, map[string][]byte{"big.bin": randomBytes(20<<20, 4)})
	r := cli(t, apiVars(srv, "", srv.AdminToken), "upload", "--workspace", uuid.NewString(), paths[0])
	expect(t, r, 1, "upload")
	if !strings.Contains(r.stderr, "request cap (4.0 MiB)") || !strings.Contains(r.stderr, "no presigned uploads") {
		t.Fatalf("stderr: got %q", r.stderr)
	}
	if !strings.Contains(r.stderr, "413 request body too large: send the files in requests under max bytes (max 4194304 bytes, 4.0 MiB)") || strings.Contains(r.stderr, "e+06") {
		t.Errorf("stderr: got %q, want the 413's max as a whole number of bytes", r.stderr)
	}
}

// TestNewcomerMistakes: the mistakes of a first hour with pendingctl are
// answered with what to do, and the exit codes of docs/clients.md.
func TestNewcomerMistakes(t *testing.T) {
	t.Run("NoDatabaseURL", func(t *testing.T) {
		for _, args := range [][]string{{"token", "create", "--workspace", uuid.NewString()}, {"migrate", "up"}, {"sweep"}} {
			r := cli(t, map[string]string{}, args...)
			expect(t, r, 2, strings.Join(args, " ")+" without DATABASE_URL")
			if !strings.Contains(r.stderr, "set DATABASE_URL (make run prints an export DATABASE_URL=… line") {
				t.Errorf("%v: stderr %q, want the way to DATABASE_URL", args, r.stderr)
			}
		}
	})
	t.Run("DatabaseURLPointsAtNothing", func(t *testing.T) {
		closed := closedAddr(t)
		r := cli(t, map[string]string{"DATABASE_URL": "postgres://postgres:pw@" + closed + "/pendinguploads?sslmode=disable"},
			"token", "create", "--workspace", uuid.NewString())
		expect(t, r, 1, "token create on a closed port")
		want := "DATABASE_URL: database pendinguploads on " + closed + ": connection refused"
		if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "make run") || strings.Contains(r.stderr, ":pw@") {
			t.Errorf("stderr: got %q, want %q and a hint at make run, without the password", r.stderr, want)
		}
	})
	t.Run("UploadMissingFile", func(t *testing.T) {
		vars := map[string]string{"PENDINGUPLOADS_API": "http://127.0.0.1:1", "PENDINGUPLOADS_TOKEN": "a-token"}
		r := cli(t, vars, "upload", "--workspace", uuid.NewString(), filepath.Join(t.TempDir(), "report.pdf"))
		expect(t, r, 2, "upload of a missing file")
		if !strings.Contains(r.stderr, "no file ") || !strings.Contains(r.stderr, "report.pdf") {
			t.Errorf("stderr: got %q", r.stderr)
		}
	})
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestPullKilledBeforeAck runs the real binary and kills it (SIGKILL)
// when its first ack arrives, before the server sees it: the file is
// durably written, and unacked. The next pull leaves exactly one copy of
// each file, all acked.
func TestPullKilledBeforeAck(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	wsTok := srv.WorkspaceToken(t, ws)
	paths, want := fixture(t, map[string][]byte{"a.txt": []byte("first"), "b.txt": []byte("second")})
	expect(t, exe(t, apiVars(srv, "", srv.AdminToken), append([]string{"upload", "--workspace", ws.String()}, paths...)...), 0, "upload")
	dir := t.TempDir()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "pull", "--workspace", ws.String(), "--dir", dir, "--once")
	var proc atomic.Pointer[os.Process]
	target, _ := url.Parse(srv.URL)
	forward := httputil.NewSingleHostReverseProxy(target)
	killer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/ack") {
			if p := proc.Load(); p != nil {
				_ = p.Kill() // the crash: the ack never reaches the server
			}
			http.Error(w, "killed", http.StatusServiceUnavailable)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	defer killer.Close()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PENDINGUPLOADS_API=" + killer.URL, "PENDINGUPLOADS_TOKEN=" + wsTok}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	proc.Store(cmd.Process)
	if err := cmd.Wait(); err == nil || cmd.ProcessState.Success() {
		t.Fatalf("pull: got %v, want killed", err)
	}
	if got := apptest.DirFiles(t, dir, inbox.StateDirName); len(got) != 1 {
		t.Fatalf("after the crash: got %d files, want 1", len(got))
	}
	if n := unacked(t, srv, ws); n != 2 {
		t.Fatalf("after the crash: %d unacked, want 2", n)
	}
	r := exe(t, apiVars(srv, "", wsTok), "pull", "--workspace", ws.String(), "--dir", dir, "--once")
	expect(t, r, 0, "pull again")
	if !strings.Contains(r.stdout, "recovered from an interrupted pull") {
		t.Fatalf("stdout: got %q", r.stdout)
	}
	got := apptest.DirFiles(t, dir, inbox.StateDirName)
	if len(got) != 2 || !bytes.Equal(got["a.txt"], want["a.txt"]) || !bytes.Equal(got["b.txt"], want["b.txt"]) {
		t.Fatalf("inbox: got %d files (%v)", len(got), got)
	}
	if n := unacked(t, srv, ws); n != 0 {
		t.Fatalf("unacked: got %d, want 0", n)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, inbox.StateDirName))
	for _, e := range ents {
		if e.Name() != "lock" {
			t.Fatalf("state left: %s", e.Name())
		}
	}
}

// tamperProxy serves target through a proxy that flips the first byte of
// content bodies, or replaces their Repr-Digest.

// TestPullTamperedRefused: a flipped byte, or a Repr-Digest (or an older
// server's Content-Digest on a 200) that does not match: refused, nothing written, nothing acked.
func TestPullTamperedRefused(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	wsTok := srv.WorkspaceToken(t, ws)
	paths, _ := fixture(t, map[string][]byte{"t.bin": randomBytes(10000, 5)})
	expect(t, cli(t, apiVars(srv, "", srv.AdminToken), "upload", "--workspace", ws.String(), paths[0]), 0, "upload")
	for name, proxy := range map[string]string{
		"FlippedByte":   apptest.TamperProxy(t, srv.URL, true, nil),
		"AlteredDigest": apptest.TamperProxy(t, srv.URL, false, map[string]string{"Repr-Digest": "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"}),
		// A server before Repr-Digest: its 200's Content-Digest is the whole file's.
		"OlderServersDigest": apptest.TamperProxy(t, srv.URL, false, map[string]string{"Repr-Digest": "", "Content-Digest": "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"}),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			r := cli(t, apiVars(srv, proxy, wsTok), "pull", "--workspace", ws.String(), "--dir", dir, "--once")
			expect(t, r, 1, "pull")
			if !strings.Contains(r.stderr, "mismatch") || !strings.Contains(r.stderr, "not written, not acked") {
				t.Fatalf("stderr: got %q", r.stderr)
			}
			if got := apptest.DirFiles(t, dir, inbox.StateDirName); len(got) != 0 {
				t.Fatalf("inbox: got %d files, want none", len(got))
			}
			if n := unacked(t, srv, ws); n != 1 {
				t.Fatalf("unacked: got %d, want 1", n)
			}
		})
	}
}

// TestWrongWorkspaceToken: a token of another workspace gets a clear
// message, and the token is not in it.
func TestWrongWorkspaceToken(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws, other := uuid.New(), uuid.New()
	tok := srv.WorkspaceToken(t, other)
	for _, args := range [][]string{
		{"ls", "--workspace", ws.String()},
		{"pull", "--workspace", ws.String(), "--dir", t.TempDir(), "--once"},
	} {
		r := cli(t, apiVars(srv, "", tok), args...)
		expect(t, r, 1, args[0])
		if !strings.Contains(r.stderr, "the server refused the token") || !strings.Contains(r.stderr, "another workspace") {
			t.Fatalf("%s: stderr %q", args[0], r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, tok) {
			t.Fatalf("%s: the token was printed", args[0])
		}
	}
}

func TestDatabaseCommands(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	db := map[string]string{"DATABASE_URL": srv.DatabaseURL}
	ws := uuid.New()

	t.Run("Migrate", func(t *testing.T) {
		empty := map[string]string{"DATABASE_URL": pgtest.MustEmptyURL(t)}
		expect(t, cli(t, empty, "migrate", "up"), 0, "migrate up")
		v := cli(t, empty, "migrate", "version")
		expect(t, v, 0, "migrate version")
		if strings.TrimSpace(v.stdout) != "20260601100600" && !strings.HasPrefix(strings.TrimSpace(v.stdout), "2026") {
			t.Fatalf("version: got %q", v.stdout)
		}
		expect(t, cli(t, empty, "migrate", "down"), 2, "migrate down without --yes")
		expect(t, cli(t, empty, "migrate", "down", "--steps", "1", "--yes"), 0, "migrate down --steps 1")
		var vj struct {
			Version, Latest uint
			Dirty           bool
		}
		r := cli(t, empty, "migrate", "version", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &vj); err != nil || vj.Version >= vj.Latest || vj.Latest != migrations.Latest {
			t.Fatalf("after down 1: got %q, %v", r.stdout, err)
		}
		expect(t, cli(t, empty, "migrate", "up"), 0, "migrate up again")
		expect(t, cli(t, empty, "migrate", "down", "--yes"), 0, "migrate down --yes")
		expect(t, cli(t, map[string]string{}, "migrate", "version"), 2, "no DATABASE_URL")
	})

	var tok string
	t.Run("TokenCreateListRevoke", func(t *testing.T) {
		r := cli(t, db, "token", "create", "--workspace", ws.String())
		expect(t, r, 0, "token create")
		tok = strings.TrimSpace(r.stdout)
		if !strings.HasPrefix(tok, "pu_") || strings.Contains(r.stderr, tok) {
			t.Fatalf("create: stdout %q, stderr %q", r.stdout, r.stderr)
		}
		expect(t, cli(t, apiVars(srv, "", tok), "ls", "--workspace", ws.String()), 3, "ls with the new token")
		var stored int
		if err := srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM workspace_auth_tokens WHERE workspace_id = $1 AND token_hash = sha256($2::bytea)`, ws, []byte(tok)).Scan(&stored); err != nil || stored != 1 {
			t.Fatalf("stored hash: got %d, %v", stored, err)
		}
		l := cli(t, db, "token", "list", "--workspace", ws.String())
		expect(t, l, 0, "token list")
		if !strings.Contains(l.stdout, tok[:9]) || strings.Contains(l.stdout, tok) {
			t.Fatalf("list: got %q", l.stdout)
		}
		var rows []map[string]any
		lj := cli(t, db, "token", "list", "--json")
		if err := json.Unmarshal([]byte(lj.stdout), &rows); err != nil || len(rows) < 1 {
			t.Fatalf("list --json: got %q, %v", lj.stdout, err)
		}
		expect(t, cli(t, db, "token", "revoke", "--workspace", ws.String(), tok[:9]), 0, "token revoke")
		expect(t, cli(t, apiVars(srv, "", tok), "ls", "--workspace", ws.String()), 1, "ls with a revoked token")
		expect(t, cli(t, db, "token", "revoke", "--workspace", ws.String(), tok[:9]), 1, "revoke again")
		expect(t, cli(t, db, "token", "create"), 2, "create without --workspace")
	})

	t.Run("Sweep", func(t *testing.T) {
		tok := srv.WorkspaceToken(t, ws)
		paths, _ := fixture(t, map[string][]byte{"s.txt": []byte("s")})
		expect(t, cli(t, apiVars(srv, "", srv.AdminToken), "upload", "--workspace", ws.String(), paths[0]), 0, "upload")
		expect(t, cli(t, apiVars(srv, "", tok), "pull", "--workspace", ws.String(), "--dir", t.TempDir()), 0, "pull")
		r := cli(t, db, "sweep", "--json")
		expect(t, r, 0, "sweep")
		if strings.TrimSpace(r.stdout) != `{"acked":0,"expired":0,"orphans":0}` {
			t.Fatalf("sweep: got %q", r.stdout)
		}
		r = cli(t, db, "sweep", "--ack-retention", "0s")
		expect(t, r, 0, "sweep --ack-retention 0s")
		if strings.TrimSpace(r.stdout) != "swept: 1 acked, 0 expired" {
			t.Fatalf("sweep: got %q", r.stdout)
		}
	})
}

func TestHelpAndUsage(t *testing.T) {
	r := cli(t, nil, "--help")
	expect(t, r, 0, "--help")
	for _, c := range commands() {
		if !strings.Contains(r.stdout, "  "+c.name+" ") {
			t.Errorf("--help does not list %s", c.name)
		}
		h := cli(t, nil, c.name, "--help")
		expect(t, h, 0, c.name+" --help")
		if !strings.HasPrefix(h.stdout, "Usage") || !strings.Contains(h.stdout, "Exit codes") {
			t.Errorf("%s --help: got %q", c.name, h.stdout)
		}
	}
	expect(t, cli(t, nil, "token", "create", "--help"), 0, "token create --help")
	// Every command that falls back to PENDINGUPLOADS_WORKSPACE for
	// --workspace says so in its help.
	ws := uuid.NewString()
	for _, c := range commands() {
		if !strings.Contains(c.usage, "--workspace") {
			continue
		}
		if !strings.Contains(c.usage, "$PENDINGUPLOADS_WORKSPACE") {
			t.Errorf("%s --help: --workspace falls back to PENDINGUPLOADS_WORKSPACE, the help does not say so", c.name)
		}
	}
	// token create takes the variable: it gets past the workspace to the
	// missing database.
	if r := cli(t, map[string]string{"PENDINGUPLOADS_WORKSPACE": ws}, "token", "create"); r.code != 2 || !strings.Contains(r.stderr, "no database") {
		t.Errorf("token create with PENDINGUPLOADS_WORKSPACE: exit %d, stderr %q; want the missing database", r.code, r.stderr)
	}
	expect(t, cli(t, nil), 2, "no command")
	expect(t, cli(t, nil, "frobnicate"), 2, "unknown command")
	for _, c := range commands() {
		// A flag no command takes (version --json included) is a usage
		// error, exit 2, whatever the command; token's subcommands parse
		// their own flags.
		args := []string{c.name, "--json-please"}
		if c.name == "token" {
			args = []string{"token", "list", "--json-please"}
		}
		r := cli(t, nil, args...)
		expect(t, r, 2, strings.Join(args, " "))
		if !strings.Contains(r.stderr, "flag provided but not defined") {
			t.Errorf("%s: stderr %q, want the flag named", strings.Join(args, " "), r.stderr)
		}
	}
	expect(t, cli(t, nil, "version", "--json"), 2, "version --json")
	expect(t, cli(t, nil, "version", "extra"), 2, "version extra")
	expect(t, cli(t, map[string]string{"PENDINGUPLOADS_API": "http://x"}, "ls", "--workspace", uuid.NewString()), 2, "no token")
	expect(t, cli(t, map[string]string{"PENDINGUPLOADS_TOKEN": "t"}, "ls", "--workspace", "nope", "--api", "http://x"), 2, "bad workspace")
	expect(t, cli(t, nil, "pull", "--once", "--interval", "5s", "--dir", "d"), 2, "--once with --interval")
}

// TestPullInterval: --interval pulls what arrives later, and stops cleanly.
func TestPullInterval(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	vars := apiVars(srv, "", tok)
	go func() {
		done <- run(ctx, []string{"pull", "--workspace", ws.String(), "--dir", dir, "--interval", "100ms"},
			func(k string) string { return vars[k] }, &out, &errb)
	}()
	time.Sleep(300 * time.Millisecond)
	paths, _ := fixture(t, map[string][]byte{"late.txt": []byte("late")})
	expect(t, cli(t, apiVars(srv, "", srv.AdminToken), "upload", "--workspace", ws.String(), paths[0]), 0, "upload")
	deadline := time.Now().Add(10 * time.Second)
	for len(apptest.DirFiles(t, dir, inbox.StateDirName)) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d, want 0; stderr %q", code, errb.String())
	}
	if got := apptest.DirFiles(t, dir, inbox.StateDirName); string(got["late.txt"]) != "late" {
		t.Fatalf("inbox: got %v", got)
	}
}

// TestDatabaseCommandsOnThePlatform: on the platform's database (uuid token
// ids, its own tracker) migrate up runs twice, and token create, list and
// revoke (by the id list shows, and by the token itself) work.
func TestDatabaseCommandsOnThePlatform(t *testing.T) {
	empty := map[string]string{"DATABASE_URL": pgtest.MustPlatformEmptyURL(t, false)}
	expect(t, cli(t, empty, "migrate", "up"), 0, "migrate up on the platform's database")
	expect(t, cli(t, empty, "migrate", "up"), 0, "migrate up again")
	expect(t, cli(t, empty, "migrate", "down", "--yes"), 1, "migrate down on the platform's database")

	srv := apptest.NewServer(t, apptest.Options{Platform: true})
	db := map[string]string{"DATABASE_URL": srv.DatabaseURL}
	ws := uuid.New()
	if _, err := srv.Pool.Exec(context.Background(), `INSERT INTO workspaces (id, name) VALUES ($1, 'w')`, ws); err != nil {
		t.Fatal(err)
	}
	r := cli(t, db, "token", "create", "--workspace", ws.String(), "--json")
	expect(t, r, 0, "token create")
	var created struct{ Token, ID string }
	if err := json.Unmarshal([]byte(r.stdout), &created); err != nil {
		t.Fatalf("create --json: %q: %v", r.stdout, err)
	}
	if _, err := uuid.Parse(created.ID); err != nil {
		t.Fatalf("token id on the platform's table: got %q, want a uuid", created.ID)
	}
	expect(t, cli(t, apiVars(srv, "", created.Token), "ls", "--workspace", ws.String()), 3, "ls with the new token")
	l := cli(t, db, "token", "list", "--workspace", ws.String())
	expect(t, l, 0, "token list")
	if !strings.Contains(l.stdout, created.ID) {
		t.Fatalf("list: got %q, want the id %s", l.stdout, created.ID)
	}
	expect(t, cli(t, db, "token", "revoke", "--workspace", ws.String(), created.ID), 0, "token revoke by uuid id")
	expect(t, cli(t, apiVars(srv, "", created.Token), "ls", "--workspace", ws.String()), 1, "ls with a revoked token")

	// A token the platform minted: revoked by the token itself.
	platformTok := "platformMintedTokenOfFortyThreeCharactersXY"
	if _, err := srv.Pool.Exec(context.Background(), `INSERT INTO workspace_auth_tokens (workspace_id, token_hash, prefix)
		VALUES ($1, sha256(convert_to($2, 'UTF8')), left($2, 8))`, ws, platformTok); err != nil {
		t.Fatal(err)
	}
	expect(t, cli(t, apiVars(srv, "", platformTok), "ls", "--workspace", ws.String()), 3, "ls with the platform's token")
	expect(t, cli(t, db, "token", "revoke", "--workspace", ws.String(), platformTok), 0, "revoke the platform's token")
	expect(t, cli(t, apiVars(srv, "", platformTok), "ls", "--workspace", ws.String()), 1, "ls with it revoked")
}
