//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
)

// TestNewcomerPath is README's first hour on a fresh clone: `make run-s3`
// (no .local yet), the printed presign, PUT and commit lines for a large
// file, a 30 MiB upload and a pull with pendingctl through the printed
// exports, byte-exact; pendingctl's database commands through the printed
// DATABASE_URL; each start-up mistake answered with its setting and fix
// while it runs; Ctrl-C stopping the server, its Postgres and its S3; and
// a restart that says what it found and keeps the admin token.
func TestNewcomerPath(t *testing.T) {
	for _, bin := range []string{"make", "curl", "bash", "moto_server"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not on PATH, and CI is set", bin)
			}
			t.Skipf("%s is not on PATH", bin)
		}
	}
	root, err := lambdatest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pendingctl := buildPendingctl(t, root)
	local := t.TempDir()
	// As root the cluster runs as "postgres", which must be able to reach
	// it: t.TempDir's parent is private to root.
	if err := os.Chmod(filepath.Dir(local), 0o755); err != nil {
		t.Fatal(err)
	}

	// make run-s3, as a terminal runs it: a process group of its own, so
	// that Ctrl-C (SIGINT to the group) reaches make, go run and the
	// server, and nothing else.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	mk := exec.Command("make", "-s", "run-s3")
	mk.Dir = root
	mk.Env = append(newcomerEnv(), "LOCAL_DIR="+local, "PORT=0", "HOST=127.0.0.1",
		"MAX_FILE_BYTES=104857600") // README: raise the 25 MiB cap for the 30 MiB file
	var out, errOut syncBuffer
	mk.Stdout, mk.Stderr = &out, &errOut
	mk.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := mk.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed when make has exited
	go func() { _ = mk.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-mk.Process.Pid, syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
		}
	})
	banner := waitFor(t, &out, &errOut, exited, "Ctrl-C stops", 4*time.Minute)

	b := parseBanner(t, banner)
	if b.s3URL == "" || b.dbURL == "" || !strings.Contains(banner, "large files in s3://uploads") {
		t.Fatalf("banner lacks the local S3, the bucket or DATABASE_URL:\n%s", banner)
	}
	if !strings.Contains(banner, "generated, and kept in") {
		t.Errorf("banner: want a generated admin token kept for the next runs:\n%s", banner)
	}

	work := t.TempDir()
	sh := func(line string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, "bash", "-c", line)
		cmd.Dir = work
		o, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, o)
		}
		return o
	}

	// The printed large-file lines, run as printed (placeholders filled
	// from presign's answer).
	sh(b.bigLines[0]) // head -c … > big.bin
	var presigned struct {
		Uploads []struct {
			UploadID string `json:"upload_id"`
			URL      string `json:"url"`
		} `json:"uploads"`
	}
	if err := json.Unmarshal(sh(b.bigLines[1]), &presigned); err != nil || len(presigned.Uploads) != 1 {
		t.Fatalf("presign answer: %v %+v", err, presigned)
	}
	up := presigned.Uploads[0]
	if u, err := url.Parse(up.URL); err != nil || u.Host != strings.TrimPrefix(b.s3URL, "http://") {
		t.Fatalf("presigned URL %q is not on the local S3 %s", up.URL, b.s3URL)
	}
	sh(strings.Replace(b.bigLines[2], "<url>", up.URL, 1))
	var committed struct {
		Files []struct {
			Name   string `json:"name"`
			Size   int64  `json:"size"`
			SHA256 string `json:"sha256"`
		} `json:"files"`
	}
	if err := json.Unmarshal(sh(strings.Replace(b.bigLines[3], "<upload_id>", up.UploadID, 1)), &committed); err != nil || len(committed.Files) != 1 {
		t.Fatalf("commit answer: %v %+v", err, committed)
	}
	bigBin, err := os.ReadFile(filepath.Join(work, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(bigBin); committed.Files[0].SHA256 != hex.EncodeToString(sum[:]) || committed.Files[0].Size != int64(len(bigBin)) {
		t.Fatalf("commit: got %+v, want %d bytes with the file's SHA-256", committed.Files[0], len(bigBin))
	}

	// pendingctl with the printed exports: 30 MiB up (as the platform,
	// with the admin token), then a pull as the workspace.
	ctl := func(vars map[string]string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, pendingctl, args...)
		cmd.Dir = work
		cmd.Env = newcomerEnv()
		for k, v := range vars {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return so.String(), se.String(), cmd.ProcessState.ExitCode()
	}
	with := func(over map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range b.exports {
			m[k] = v
		}
		for k, v := range over {
			m[k] = v
		}
		return m
	}
	thirty := randomFile(t, work, "thirty.bin", 30<<20, 1)
	if so, se, code := ctl(with(map[string]string{"PENDINGUPLOADS_TOKEN": b.adminToken}), "upload", "thirty.bin"); code != 0 {
		t.Fatalf("pendingctl upload of 30 MiB: exit %d\n%s%s", code, so, se)
	}
	so, se, code := ctl(b.exports, "pull", "--dir", "inbox", "--once", "--json")
	if code != 0 || !strings.Contains(so, `"listed":2`) || !strings.Contains(so, `"remaining":0`) {
		t.Fatalf("pendingctl pull: exit %d\n%s%s", code, so, se)
	}
	for name, want := range map[string][]byte{"big.bin": bigBin, "thirty.bin": thirty} {
		got, err := os.ReadFile(filepath.Join(work, "inbox", name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("inbox/%s: %d bytes, %v; want the %d bytes uploaded", name, len(got), err, len(want))
		}
	}
	if so, se, code := ctl(b.exports, "token", "create"); code != 0 || !strings.HasPrefix(so, "pu_") {
		t.Fatalf("pendingctl token create with the printed DATABASE_URL: exit %d\n%s%s", code, so, se)
	}
	if so, se, code := ctl(b.exports, "sweep", "--json"); code != 0 {
		t.Fatalf("pendingctl sweep with the printed exports: exit %d\n%s%s", code, so, se)
	}
	// A file left waiting in the bucket, for the restart below.
	randomFile(t, work, "left.bin", 5<<20, 2)
	if so, se, code := ctl(with(map[string]string{"PENDINGUPLOADS_TOKEN": b.adminToken}), "upload", "left.bin"); code != 0 {
		t.Fatalf("pendingctl upload of 5 MiB: exit %d\n%s%s", code, so, se)
	}

	// The mistakes, while it runs: each stops at start and names the
	// setting and the fix.
	isolateAWS(t)
	port := strings.TrimPrefix(b.base[strings.LastIndex(b.base, ":"):], ":")
	next, _ := strconv.Atoi(port)
	for name, c := range map[string]struct {
		env  map[string]string
		want []string
	}{
		"SecondInstance": {map[string]string{"LOCAL_DIR": local, "PORT": "0"},
			[]string{"devserver: LOCAL_DIR: another dev server's Postgres", "already runs on " + filepath.Join(local, "pg"),
				"is make run already running in this clone?", "LOCAL_DIR=.local-2 PORT=8081 make run"}},
		"PortTaken": {map[string]string{"LOCAL_DIR": t.TempDir(), "PORT": port},
			[]string{"devserver: PORT: port " + port + " is taken by another program (a second make run?)",
				"PORT=" + strconv.Itoa(next+1) + " make run"}},
		"DatabaseURLPointsAtNothing": {map[string]string{"LOCAL_DIR": t.TempDir(), "PORT": "0",
			"DATABASE_URL": "postgres://postgres:pw@" + closedAddr(t) + "/pendinguploads?sslmode=disable"},
			[]string{"devserver: DATABASE_URL: database pendinguploads on 127.0.0.1:", "connection refused",
				"unset DATABASE_URL, and make run starts a Postgres of its own"}},
		"NoSuchBucket": {map[string]string{"LOCAL_DIR": t.TempDir(), "PORT": "0", "DATABASE_URL": b.dbURL,
			"CONTENT_BUCKET": "nosuch", "S3_ENDPOINT": b.s3URL, "S3_FORCE_PATH_STYLE": "true"},
			[]string{`devserver: CONTENT_BUCKET: there is no bucket "nosuch" at S3_ENDPOINT ` + b.s3URL,
				"aws --endpoint-url " + b.s3URL + " s3 mb s3://nosuch", "make run-s3"}},
		"S3Unreachable": {map[string]string{"LOCAL_DIR": t.TempDir(), "PORT": "0", "DATABASE_URL": b.dbURL,
			"CONTENT_BUCKET": "uploads", "S3_ENDPOINT": "http://" + closedAddr(t), "S3_FORCE_PATH_STYLE": "true"},
			[]string{"devserver: S3_ENDPOINT: nothing answers at http://127.0.0.1:", "make run-s3"}},
		"LocalS3WithEndpoint": {map[string]string{"LOCAL_DIR": t.TempDir(), "PORT": "0", "LOCAL_S3": "1", "S3_ENDPOINT": b.s3URL},
			[]string{"devserver: LOCAL_S3: starts a local S3 at an endpoint of its own: unset S3_ENDPOINT"}},
	} {
		t.Run(name, func(t *testing.T) {
			c.env["HOST"] = "127.0.0.1"
			code, stdout, stderr := runToExit(t, c.env)
			if code != 1 {
				t.Fatalf("exit %d, want 1\n%s%s", code, stdout, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, ":pw@") {
				t.Errorf("a password is in stderr:\n%s", stderr)
			}
		})
	}

	// Ctrl-C stops all of it: make, the server, its Postgres, its S3.
	if err := syscall.Kill(-mk.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("make run-s3 still runs a minute after Ctrl-C:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "Stopping...") {
		t.Errorf("no 'Stopping...' after Ctrl-C:\n%s", out.String())
	}
	pgURL, _ := url.Parse(b.dbURL)
	for _, addr := range []string{strings.TrimPrefix(b.s3URL, "http://"), pgURL.Host, strings.TrimPrefix(b.base, "http://")} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still answers after Ctrl-C", addr)
		}
	}

	// A restart says it found the data, keeps the admin token, the
	// workspace and the database's port; the file whose bytes were in the
	// last run's moto is expired; tokens printed before still work.
	rctx, rcancel := context.WithCancel(context.Background())
	defer rcancel()
	env := map[string]string{"LOCAL_DIR": local, "PORT": "0", "HOST": "127.0.0.1", "LOCAL_S3": "1"}
	var rout, rerr syncBuffer
	ready := make(chan string, 1)
	exit := make(chan int, 1)
	go func() { exit <- run(rctx, func(k string) string { return env[k] }, &rout, &rerr, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case code := <-exit:
		t.Fatalf("restart exited %d:\n%s\n%s", code, rout.String(), rerr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("restart not ready:\n%s", rerr.String())
	}
	again := parseBanner(t, rout.String())
	for _, w := range []string{
		"A restart: found the data of earlier runs in " + filepath.Join(local, "pg") + ": 1 file waiting in 1 workspace",
		"The tokens printed before still work, the admin token too, and so do download links; the workspace is the last run's.",
		"Of those, 1 had their bytes in the last run's local S3",
		"the same as the last run's, kept in",
	} {
		if !strings.Contains(rout.String(), w) {
			t.Errorf("restart banner lacks %q:\n%s", w, rout.String())
		}
	}
	if again.adminToken != b.adminToken || again.ws != b.ws || again.dbURL != b.dbURL {
		t.Errorf("restart: admin token, workspace or DATABASE_URL changed:\n%s", rout.String())
	}
	for _, tok := range []string{b.adminToken, b.wsToken} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/workspaces/"+b.ws+"/pending-uploads", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("a token of the first run after the restart: %d %s", resp.StatusCode, body)
		}
	}
	rcancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("restart: exit %d on Ctrl-C:\n%s", code, rerr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("restart: did not stop")
	}
}

// newcomerEnv is this process's environment without the settings a
// newcomer has not set (a CI machine may have some).
func newcomerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "DATABASE_URL", k == "DB_SECRET_ARN", k == "ADMIN_TOKEN", k == "ADMIN_TOKEN_SECRET_ARN",
			k == "CONTENT_BUCKET", k == "LOCAL_S3", k == "LOCAL_DIR", k == "DEV_WORKSPACE_ID", k == "PORT", k == "HOST",
			strings.HasPrefix(k, "S3_"), strings.HasPrefix(k, "AWS_"), strings.HasPrefix(k, "PENDINGUPLOADS_"):
			continue
		}
		env = append(env, kv)
	}
	return env
}

// isolateAWS gives in-process runs moto's dummy credentials and nothing
// of the machine's AWS configuration.
func isolateAWS(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": missing, "AWS_SHARED_CREDENTIALS_FILE": missing, "AWS_PROFILE": "",
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "",
		"AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
}

// runToExit runs the dev server in this process with exactly env and
// returns how it exited; it must exit by itself (a start that fails).
func runToExit(t *testing.T, env map[string]string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	ready := make(chan string, 1)
	exit := make(chan int, 1)
	go func() { exit <- run(ctx, func(k string) string { return env[k] }, &stdout, &stderr, ready) }()
	select {
	case code := <-exit:
		return code, stdout.String(), stderr.String()
	case <-ready:
		cancel()
		<-exit
		t.Fatalf("the dev server started, want a failed start:\n%s", stdout.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("the dev server neither started nor failed:\n%s", stderr.String())
	}
	return 0, "", ""
}

// waitFor waits until out holds marker and returns it.
func waitFor(t *testing.T, out, errOut *syncBuffer, exited <-chan struct{}, marker string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for !strings.Contains(out.String(), marker) {
		select {
		case <-exited:
			t.Fatalf("exited before %q:\n%s\n%s", marker, out.String(), errOut.String())
		case <-deadline:
			t.Fatalf("no %q after %s:\n%s\n%s", marker, timeout, out.String(), errOut.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return out.String()
}

// printed is what a banner tells a newcomer.
type printed struct {
	base, adminToken, ws, wsToken, s3URL, dbURL string
	bigLines                                    []string // head, presign, PUT, commit
	exports                                     map[string]string
}

func parseBanner(t *testing.T, banner string) printed {
	t.Helper()
	find := func(re string) string {
		m := regexp.MustCompile(re).FindStringSubmatch(banner)
		if m == nil {
			t.Fatalf("banner lacks %s:\n%s", re, banner)
		}
		return m[1]
	}
	p := printed{
		base:       find(`dev server on (http://\S+)`),
		adminToken: find(`admin token\s+(\S+)`),
		ws:         find(`(?m)^  workspace\s+(\S+)$`),
		wsToken:    find(`workspace token\s+(\S+)`),
		exports:    map[string]string{},
	}
	if m := regexp.MustCompile(`on a local S3 at (http://[^\s)]+)`).FindStringSubmatch(banner); m != nil {
		p.s3URL = m[1]
	}
	lines := strings.Split(banner, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "Stage a large file") && i+4 < len(lines) {
			for _, c := range lines[i+1 : i+5] {
				p.bigLines = append(p.bigLines, strings.TrimSpace(c))
			}
		}
		if rest, ok := strings.CutPrefix(l, "  export "); ok {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				p.exports[k] = strings.Trim(v, "'")
			}
		}
	}
	p.dbURL = p.exports["DATABASE_URL"]
	if p.exports["PENDINGUPLOADS_TOKEN"] != p.wsToken || p.exports["PENDINGUPLOADS_WORKSPACE"] != p.ws {
		t.Fatalf("banner's exports %v do not match its workspace and token:\n%s", p.exports, banner)
	}
	if p.s3URL != "" && len(p.bigLines) != 4 {
		t.Fatalf("banner lacks the four large-file lines:\n%s", banner)
	}
	return p
}

// buildPendingctl builds pendingctl once for the test with the line
// README gives and the banner prints (into the test's folder, not the
// clone's).
func buildPendingctl(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pendingctl")
	line := strings.Fields(pendingctlBuildLine) // go build [flags] ./cmd/pendingctl
	pkg := line[len(line)-1]
	cmd := exec.Command(line[0], append(line[1:len(line)-1:len(line)-1], "-o", bin, pkg)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", pendingctlBuildLine, err, out)
	}
	return bin
}

// randomFile writes n seeded random bytes to dir/name and returns them.
func randomFile(t *testing.T, dir, name string, n int, seed uint64) []byte {
	t.Helper()
	var key [32]byte // ChaCha8 in one Read: a byte at a time is seconds under -race
	binary.LittleEndian.PutUint64(key[:], seed)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return b
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
