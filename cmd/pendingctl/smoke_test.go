package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/gatewaytest"
)

// smokeParts are the settings under which smoke's file in parts is small:
// 5 MiB and one byte, in two parts. A new map each time: partsServer
// adds its proxy's S3_ENDPOINT to the one it is given.
func smokeParts() map[string]string {
	return map[string]string{"MULTIPART_THRESHOLD_BYTES": fmt.Sprint(5 << 20), "MULTIPART_PART_BYTES": fmt.Sprint(5 << 20)}
}

// everyStep is the table of a smoke run that passed, on a server that
// takes files in parts.
var everyStep = []string{stepLimits, stepUpload, stepList, stepContent, stepParts, stepResume, stepPartsContent, stepAck, stepListAfterAck, stepCleanup}

func smokeVars(api string, ws uuid.UUID, token string) map[string]string {
	return map[string]string{"PENDINGUPLOADS_API": api, "PENDINGUPLOADS_WORKSPACE": ws.String(), "PENDINGUPLOADS_TOKEN": token}
}

// tableRow is a row of smoke's table.
type tableRow struct{ step, result, detail string }

var rowRE = regexp.MustCompile(`^(\S+)\s+(Ok|Fail|Skipped)\s+(\d+ms|\d+\.\ds)  (.*)$`)

// table reads smoke's table from its stdout: the header, then one row
// per step, then (when every step passed) the closing line.
func table(t *testing.T, stdout string) []tableRow {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "STEP ") {
		t.Fatalf("no table header in %q", stdout)
	}
	var rows []tableRow
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "all steps passed in ") {
			break
		}
		m := rowRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a row of the table: %q in\n%s", l, stdout)
		}
		rows = append(rows, tableRow{m[1], m[2], m[4]})
	}
	return rows
}

// wantTable fails t unless rows are steps, in order, with results.
func wantTable(t *testing.T, rows []tableRow, steps []string, results map[string]string) {
	t.Helper()
	var got []string
	for _, r := range rows {
		got = append(got, r.step)
		want := "Ok"
		if w, ok := results[r.step]; ok {
			want = w
		}
		if r.result != want {
			t.Errorf("step %s: got %s (%s), want %s", r.step, r.result, r.detail, want)
		}
	}
	if strings.Join(got, " ") != strings.Join(steps, " ") {
		t.Errorf("steps: got %v, want %v", got, steps)
	}
}

func detail(rows []tableRow, step string) string {
	for _, r := range rows {
		if r.step == step {
			return r.detail
		}
	}
	return ""
}

// unfinished counts ws's presigned uploads neither committed nor aborted.
func unfinished(t *testing.T, srv *apptest.Server, ws uuid.UUID) int {
	t.Helper()
	var n int
	if err := srv.Pool.QueryRow(context.Background(), `SELECT count(*) FROM presigned_uploads WHERE workspace_id = $1 AND file_id IS NULL`, ws).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantClean fails t unless smoke left nothing behind in ws: every file
// it staged (staged of them) acked, no upload begun and left.
func wantClean(t *testing.T, srv *apptest.Server, ws uuid.UUID, staged int) {
	t.Helper()
	if n := rows(t, srv, ws); n != staged {
		t.Errorf("files staged: %d, want %d", n, staged)
	}
	if n := unacked(t, srv, ws); n != 0 {
		t.Errorf("files left unacked: %d, want 0", n)
	}
	if n := unfinished(t, srv, ws); n != 0 {
		t.Errorf("uploads left unfinished: %d, want 0", n)
	}
}

// TestSmokeDevServer: pendingctl smoke against the service with a bucket
// (moto) behind a part-counting proxy passes every step; the file in
// parts sends part 1, stops, and the resume sends only part 2; both files
// are acked; the table and --json say so, without the token.
func TestSmokeDevServer(t *testing.T) {
	srv, proxy := partsServer(t, smokeParts())
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)

	r := cli(t, smokeVars(srv.URL, ws, tok), "smoke")
	expect(t, r, 0, "smoke")
	rows := table(t, r.stdout)
	wantTable(t, rows, everyStep, nil)
	if !strings.Contains(r.stdout, "\nall steps passed in ") {
		t.Errorf("stdout: no closing line in\n%s", r.stdout)
	}
	for step, want := range map[string]string{
		stepLimits:       "presign, parts of 5.0 MiB above 5.0 MiB",
		stepParts:        "in 2 parts of 5.0 MiB as upload ",
		stepResume:       "the bucket held part 1; sent the other 1 part (1 B) and committed as ",
		stepContent:      "4.0 KiB byte for byte (SHA-256 ",
		stepPartsContent: "5.0 MiB byte for byte (SHA-256 ",
		stepAck:          "2 files acked",
		stepCleanup:      "nothing left to clean up",
	} {
		if d := detail(rows, step); !strings.Contains(d, want) {
			t.Errorf("step %s: detail %q, want %q in it", step, d, want)
		}
	}
	if got := proxy.Parts(); len(got) != 2 || got[1] != 1 || got[2] != 1 {
		t.Errorf("part PUTs: got %v, want parts 1 and 2 once each", got)
	}
	wantClean(t, srv, ws, 2)
	if strings.Contains(r.stdout+r.stderr, tok) {
		t.Errorf("the token was printed")
	}
	t.Logf("smoke's table:\n%s", r.stdout)

	t.Run("JSON", func(t *testing.T) {
		r := cli(t, smokeVars(srv.URL, ws, tok), "smoke", "--json")
		expect(t, r, 0, "smoke --json")
		var out struct {
			OK         bool
			FailedStep string `json:"failed_step"`
			Steps      []smokeStep
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("stdout %q: %v", r.stdout, err)
		}
		var got []string
		for _, s := range out.Steps {
			got = append(got, s.Name)
			if s.Result != "ok" {
				t.Errorf("step %s: %s %q", s.Name, s.Result, s.Detail)
			}
		}
		if !out.OK || out.FailedStep != "" || strings.Join(got, " ") != strings.Join(everyStep, " ") {
			t.Errorf("--json: got %s", r.stdout)
		}
		wantClean(t, srv, ws, 4)
	})
}

// TestSmokeNoBucket: without a bucket the file in parts is skipped, and
// says why; the rest passes.
func TestSmokeNoBucket(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	r := cli(t, smokeVars(srv.URL, ws, srv.WorkspaceToken(t, ws)), "smoke")
	expect(t, r, 0, "smoke")
	rows := table(t, r.stdout)
	wantTable(t, rows, []string{stepLimits, stepUpload, stepList, stepContent, stepParts, stepAck, stepListAfterAck, stepCleanup},
		map[string]string{stepParts: "Skipped"})
	if d := detail(rows, stepParts); !strings.Contains(d, "no bucket (limits: presign false)") {
		t.Errorf("upload-parts: detail %q, want why it is skipped", d)
	}
	wantClean(t, srv, ws, 1)
}

// TestSmokeWrongToken: a token of another workspace fails the first step
// that takes one, upload, by name, with exit 1; limits (public) passed,
// nothing after upload ran.
func TestSmokeWrongToken(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, uuid.New())
	r := cli(t, smokeVars(srv.URL, ws, tok), "smoke")
	expect(t, r, 1, "smoke with another workspace's token")
	wantTable(t, table(t, r.stdout), []string{stepLimits, stepUpload, stepCleanup}, map[string]string{stepUpload: "Fail"})
	if want := `pendingctl smoke: step "upload" failed: the server refused the token (401`; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr: got %q, want %q", r.stderr, want)
	}
	if strings.Contains(r.stdout+r.stderr, tok) {
		t.Errorf("the token was printed")
	}
	if n := rows(t, srv, ws); n != 0 {
		t.Errorf("files staged: %d, want 0", n)
	}
}

// hookProxy serves target through a proxy that lets hook answer a
// request first: hook returns true when it did.
func hookProxy(t *testing.T, target string, hook func(http.ResponseWriter, *http.Request) bool) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hook(w, r) {
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(ps.Close)
	return ps.URL
}

// TestSmokeFailureCleansUp: a step that fails is named, exit 1, and what
// the run staged is acked and what it began aborted: bytes tampered with
// on the way (content), a server that has lost the resume route (as a
// function that does not serve it: resume), a list that never answers
// (--step-timeout: list).
func TestSmokeFailureCleansUp(t *testing.T) {
	srv, _ := partsServer(t, smokeParts())
	resumeRoute := regexp.MustCompile(`/chat/uploads/presign/[^/]+$`)
	for _, tc := range []struct {
		name   string
		api    func() string
		args   []string
		step   string
		say    string
		staged int
	}{
		{"ContentTampered", func() string { return apptest.TamperProxy(t, srv.URL, true, nil) }, nil,
			stepContent, "sha256 mismatch", 1},
		{"ResumeNotServed", func() string {
			return hookProxy(t, srv.URL, func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method == "POST" && resumeRoute.MatchString(r.URL.Path) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusNotFound)
					w.Write([]byte(`{"error":"not found","code":"not_found"}` + "\n"))
					return true
				}
				return false
			})
		}, nil, stepResume, "answered 404: does the API serve POST /workspaces/{workspaceId}/chat/uploads/presign/{uploadId}?", 1},
		{"ListHangs", func() string {
			return hookProxy(t, srv.URL, func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/pending-uploads") {
					<-r.Context().Done()
					return true
				}
				return false
			})
		}, []string{"--step-timeout", "2s"}, stepList, "no answer within --step-timeout (2s)", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := uuid.New()
			start := time.Now()
			r := cli(t, smokeVars(tc.api(), ws, srv.WorkspaceToken(t, ws)), append([]string{"smoke"}, tc.args...)...)
			t.Logf("smoke:\n%s%s", r.stdout, r.stderr)
			expect(t, r, 1, "smoke")
			rows := table(t, r.stdout)
			if last := rows[len(rows)-1]; last.step != stepCleanup || last.result != "Ok" || !strings.Contains(last.detail, "acked ") {
				t.Errorf("last row: got %+v, want a clean-up that acked", last)
			}
			if failed := rows[len(rows)-2]; failed.step != tc.step || failed.result != "Fail" {
				t.Errorf("failed row: got %+v, want %s Fail", failed, tc.step)
			}
			if want := fmt.Sprintf("pendingctl smoke: step %q failed: ", tc.step); !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, tc.say) {
				t.Errorf("stderr: got %q, want %q and %q", r.stderr, want, tc.say)
			}
			wantClean(t, srv, ws, tc.staged)
			if took := time.Since(start); took > time.Minute {
				t.Errorf("took %s", took)
			}
		})
	}
}

// TestSmokeUsage: missing settings and bad flags are usage errors (exit
// 2), before any request.
func TestSmokeUsage(t *testing.T) {
	ws := uuid.New()
	full := smokeVars("http://127.0.0.1:1", ws, "a-token")
	without := func(k string) map[string]string {
		m := map[string]string{}
		for kk, v := range full {
			if kk != k {
				m[kk] = v
			}
		}
		return m
	}
	for name, c := range map[string]struct {
		vars map[string]string
		args []string
		say  string
	}{
		"NoAPI":           {without("PENDINGUPLOADS_API"), nil, "no API URL"},
		"NoToken":         {without("PENDINGUPLOADS_TOKEN"), nil, "no token"},
		"NoWorkspace":     {without("PENDINGUPLOADS_WORKSPACE"), nil, "--workspace is required"},
		"ZeroStepTimeout": {full, []string{"--step-timeout", "0s"}, "--step-timeout must be positive"},
		"Argument":        {full, []string{"extra"}, `unexpected argument "extra"`},
	} {
		t.Run(name, func(t *testing.T) {
			r := cli(t, c.vars, append([]string{"smoke"}, c.args...)...)
			expect(t, r, 2, name)
			if !strings.Contains(r.stderr, c.say) {
				t.Errorf("stderr: got %q, want %q", r.stderr, c.say)
			}
		})
	}
}

// TestSmokeFunctionBinaries: pendingctl smoke against the real function
// binaries, each behind the route httpapi.Routes gives it, through a
// loopback API Gateway (gatewaytest), over Postgres and a bucket on moto:
// another workspace's token fails at upload, by name; the workspace's
// own passes every step, as it must on AWS.
func TestSmokeFunctionBinaries(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{S3: true})
	env := append([]string{"DATABASE_URL=" + srv.DatabaseURL, "ADMIN_TOKEN=" + srv.AdminToken, "DOWNLOAD_LINK_KEY=" + apptest.LinkKey,
		"CONTENT_BUCKET=" + srv.Bucket}, srv.S3.Env()...)
	for k, v := range smokeParts() {
		env = append(env, k+"="+v)
	}
	gw := gatewaytest.Start(t, env)
	ws := uuid.New()
	t.Run("WrongToken", func(t *testing.T) {
		r := cli(t, smokeVars(gw.URL, ws, srv.WorkspaceToken(t, uuid.New())), "smoke")
		expect(t, r, 1, "smoke through the function binaries with another workspace's token")
		wantTable(t, table(t, r.stdout), []string{stepLimits, stepUpload, stepCleanup}, map[string]string{stepUpload: "Fail"})
		if want := `pendingctl smoke: step "upload" failed: the server refused the token (401`; !strings.Contains(r.stderr, want) {
			t.Errorf("stderr: got %q, want %q", r.stderr, want)
		}
	})
	r := cli(t, smokeVars(gw.URL, ws, srv.WorkspaceToken(t, ws)), "smoke")
	t.Logf("smoke through the functions:\n%s%s", r.stdout, r.stderr)
	expect(t, r, 0, "smoke through the function binaries")
	wantTable(t, table(t, r.stdout), everyStep, nil)
	wantClean(t, srv, ws, 2)
}

// TestSmokeInterrupted: Ctrl-C (SIGINT to the binary) while the resume
// sends its part ends the run at resume, interrupted, exit 1, and the
// clean-up still runs: the upload begun is aborted, the small file acked.
func TestSmokeInterrupted(t *testing.T) {
	srv, proxy := partsServer(t, smokeParts())
	ws := uuid.New()
	r := stopMidway(t, proxy, smokeVars(srv.URL, ws, srv.WorkspaceToken(t, ws)), 1, os.Interrupt, "smoke")
	t.Logf("smoke:\n%s%s", r.stdout, r.stderr)
	expect(t, r, 1, "smoke interrupted")
	if want := `pendingctl smoke: step "resume" failed: interrupted: `; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr: got %q, want %q", r.stderr, want)
	}
	rows := table(t, r.stdout)
	if last := rows[len(rows)-1]; last.step != stepCleanup || last.result != "Ok" || !strings.Contains(last.detail, "aborted upload ") {
		t.Errorf("last row: got %+v, want a clean-up that aborted the upload", last)
	}
	wantClean(t, srv, ws, 1)
}

// TestSmokeCleanupFails: acks that fail fail the ack step and then the
// clean-up, both named on stderr, the clean-up naming the file it left.
func TestSmokeCleanupFails(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	api := hookProxy(t, srv.URL, func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, "/ack") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"error":"storage error","code":"internal"}` + "\n"))
			return true
		}
		return false
	})
	ws := uuid.New()
	r := cli(t, smokeVars(api, ws, srv.WorkspaceToken(t, ws)), "smoke")
	expect(t, r, 1, "smoke with acks refused")
	wantTable(t, table(t, r.stdout), []string{stepLimits, stepUpload, stepList, stepContent, stepParts, stepAck, stepCleanup},
		map[string]string{stepParts: "Skipped", stepAck: "Fail", stepCleanup: "Fail"})
	var id string
	if err := srv.Pool.QueryRow(context.Background(), `SELECT file_id::text FROM pending_uploads WHERE workspace_id = $1 AND acked_at IS NULL`, ws).Scan(&id); err != nil {
		t.Fatalf("the file left unacked: %v", err)
	}
	for _, want := range []string{
		`pendingctl smoke: step "ack" failed: ack ` + id + `: 500 storage error`,
		`pendingctl smoke: step "cleanup" failed: could not clean up file ` + id + ` (ack ` + id + `: 500 storage error; it stays pending until it expires)`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr: got %q, want %q", r.stderr, want)
		}
	}
}

// TestSmokeHelpNamesTheResults: the RESULT words smoke's help lists are
// the words its table prints, for every result a step can have.
func TestSmokeHelpNamesTheResults(t *testing.T) {
	m := regexp.MustCompile(`RESULT \(([^)]*)\)`).FindStringSubmatch(smokeUsage)
	if m == nil {
		t.Fatal("smoke's help lists no RESULT words")
	}
	listed := strings.NewReplacer(",", " ", " or ", " ").Replace(m[1])
	for _, result := range []string{"ok", "fail", "skipped"} {
		if word := tableResult(result); !slices.Contains(strings.Fields(listed), word) {
			t.Errorf("the table prints %q for %s; the help lists %q", word, result, m[1])
		}
	}
}
