// Package functions_test runs every Lambda function of functions/ as
// Lambda runs it: each is built as a bootstrap binary (internal/testkit/lambdatest,
// the flags of lambda.mk, for the host's architecture), started under an
// in-test Runtime API server with a real Postgres behind it (internal/testkit/pgtest),
// and fed the sample events of events/, the same files `sam local invoke`
// takes. Where a test must first create a row, it substitutes the real IDs
// for the events' placeholders.
//
// Each function is built once per test binary; the tests run in parallel.
package functions_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/lambdafn"
	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/migrations"
)

func TestMain(m *testing.M) { testkit.Main(m, removeARM64Builds) }

// invokeTimeout bounds one invocation in these tests.
const invokeTimeout = 30 * time.Second

// httpFunctions are the functions behind the HTTP API.
var httpFunctions = []string{"upload", "presign", "list", "content", "ack"}

// start builds fn (once per test binary) and starts it with env.
func start(t testing.TB, fn string, env ...string) *lambdatest.Runtime {
	t.Helper()
	return lambdatest.Start(t, lambdatest.Build(t, fn), env)
}

// linkKey is a download links' key of DOWNLOAD_LINK_KEY, for the tests
// of that variable.
const linkKey = "functions-test-download-link-key-0123456789"

// dbEnv is the environment of a function over databaseURL, authenticated
// by the events' admin token (and, for content, signing download links
// with the database's keys, as the template leaves it).
func dbEnv(databaseURL string) []string {
	return []string{"DATABASE_URL=" + databaseURL, "ADMIN_TOKEN=" + adminToken}
}

// invoke hands event to rt and returns the function's answer; a failed
// invocation fails the test.
func invoke(t testing.TB, rt *lambdatest.Runtime, event []byte) []byte {
	t.Helper()
	return invokeResult(t, rt, event).Payload
}

// invokeResult hands event to rt and returns the whole result; a failed
// invocation fails the test.
func invokeResult(t testing.TB, rt *lambdatest.Runtime, event []byte) lambdatest.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), invokeTimeout)
	defer cancel()
	res, err := rt.Invoke(ctx, event)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if res.Err != nil {
		t.Fatalf("invoke: function error %v", res.Err)
	}
	return res
}

// invokeHTTP invokes an HTTP function and decodes its API Gateway response:
// a buffered one's JSON, or a streamed one's prelude and body (the body's
// bytes then in Body as they are).
func invokeHTTP(t testing.TB, rt *lambdatest.Runtime, event []byte) httpResponse {
	t.Helper()
	res := invokeResult(t, rt, event)
	var resp httpResponse
	resp.Streamed = res.Streamed
	if res.Streamed {
		prelude, body, err := lambdatest.SplitStreamed(res.Payload)
		if err != nil {
			t.Fatalf("streamed response: %v", err)
		}
		if err := json.Unmarshal(prelude, &resp.APIGatewayProxyResponse); err != nil {
			t.Fatalf("streamed response prelude %q: %v", prelude, err)
		}
		resp.Body = string(body)
		return resp
	}
	if err := json.Unmarshal(res.Payload, &resp.APIGatewayProxyResponse); err != nil {
		t.Fatalf("response: %v", err)
	}
	return resp
}

// httpResponse is an HTTP function's answer as API Gateway gets it.
type httpResponse struct {
	events.APIGatewayProxyResponse
	// Streamed: the function streamed it (the content function); Body then
	// holds the bytes themselves.
	Streamed bool
}

// withFileID returns event with the file placeholder replaced by id.
func withFileID(event []byte, id string) []byte {
	return bytes.ReplaceAll(event, []byte(filePlaceholder), []byte(id))
}

// header returns the response header name, whatever its case.
func header(resp httpResponse, name string) string {
	for k, v := range resp.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	for k, v := range resp.MultiValueHeaders {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// responseBody returns the body's bytes, base64-decoded when flagged.
func responseBody(t testing.TB, resp httpResponse) []byte {
	t.Helper()
	if !resp.IsBase64Encoded {
		return []byte(resp.Body)
	}
	b, err := base64.StdEncoding.DecodeString(resp.Body)
	if err != nil {
		t.Fatalf("body flagged base64 is not: %v", err)
	}
	return b
}

// wantJSON checks a JSON response's status and Content-Type and decodes
// its body into v.
func wantJSON(t testing.TB, resp httpResponse, status int, v any) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status: got %d, want %d; body %s", resp.StatusCode, status, resp.Body)
	}
	if ct := header(resp, "Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type: got %q, want application/json", ct)
	}
	if err := json.Unmarshal(responseBody(t, resp), v); err != nil {
		t.Fatalf("body %q: %v", resp.Body, err)
	}
}

type stagedFile struct {
	FileID   string `json:"file_id"`
	URI      string `json:"uri"`
	Name     string `json:"name"`
	MimeType string `json:"mimeType"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
}

type listedUpload struct {
	stagedFile
	CreatedAt string  `json:"created_at"`
	ExpiresAt string  `json:"expires_at"`
	FetchedAt *string `json:"fetched_at"`
}

type listBody struct {
	Uploads    []listedUpload `json:"uploads"`
	NextCursor *string        `json:"next_cursor"`
}

// TestHTTPFunctions runs the canvas-to-workspace round trip through the
// five HTTP functions with the sample events: upload stages the two files
// of events/upload.json, list shows them, content serves each byte-exact
// (the PNG base64-encoded) with API.md's headers, ack answers
// {"acked":true} and list then leaves the file out, a workspace token
// works in place of the admin token, and presign without a bucket is a
// JSON 404.
func TestHTTPFunctions(t *testing.T) {
	t.Parallel()
	url := knownDB(t)
	env := dbEnv(url)
	rts := make(map[string]*lambdatest.Runtime)
	for _, fn := range httpFunctions {
		rts[fn] = start(t, fn, env...)
	}

	// upload
	var staged struct {
		Files []stagedFile `json:"files"`
	}
	wantJSON(t, invokeHTTP(t, rts["upload"], readEvent(t, "upload")), http.StatusOK, &staged)
	if len(staged.Files) != len(uploadFiles) {
		t.Fatalf("upload: got %d files, want %d", len(staged.Files), len(uploadFiles))
	}
	byID := make(map[string]uploadFile)
	for i, f := range staged.Files {
		want := uploadFiles[i]
		sum := sha256.Sum256(want.data)
		if _, err := uuid.Parse(f.FileID); err != nil {
			t.Errorf("upload file %d: file_id %q: %v", i, f.FileID, err)
		}
		if f.URI != "platform-pending:"+workspacePlaceholder+"/"+f.FileID ||
			f.Name != want.sanitized || f.MimeType != want.mimetype ||
			f.Size != int64(len(want.data)) || f.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("upload file %d: got %+v, want name %q, mimeType %q, size %d, sha256 %x",
				i, f, want.sanitized, want.mimetype, len(want.data), sum)
		}
		byID[f.FileID] = want
	}

	// list
	list := func() listBody {
		t.Helper()
		var got listBody
		wantJSON(t, invokeHTTP(t, rts["list"], readEvent(t, "list")), http.StatusOK, &got)
		return got
	}
	got := list()
	if len(got.Uploads) != len(staged.Files) || got.NextCursor != nil {
		t.Fatalf("list: got %+v, want the %d staged files and no next_cursor", got, len(staged.Files))
	}
	for _, u := range got.Uploads {
		want, ok := byID[u.FileID]
		if !ok || u.Name != want.sanitized || u.Size != int64(len(want.data)) || u.FetchedAt != nil {
			t.Errorf("list: got %+v, want one of the staged files, never fetched", u)
		}
	}

	// content
	for i, f := range staged.Files {
		want := uploadFiles[i]
		resp := invokeHTTP(t, rts["content"], withFileID(readEvent(t, "content"), f.FileID))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("content %s: status got %d, want 200; body %s", want.sanitized, resp.StatusCode, resp.Body)
		}
		if !resp.Streamed || resp.IsBase64Encoded {
			t.Errorf("content %s: streamed %v, base64 %v; want the bytes streamed as they are", want.sanitized, resp.Streamed, resp.IsBase64Encoded)
		}
		if body := responseBody(t, resp); !bytes.Equal(body, want.data) {
			t.Errorf("content %s: body got %x, want %x", want.sanitized, body, want.data)
		}
		sum := sha256.Sum256(want.data)
		for name, value := range map[string]string{
			"Content-Type":           want.mimetype,
			"Content-Length":         strconv.Itoa(len(want.data)),
			"Content-Disposition":    `attachment; filename="` + want.sanitized + `"; filename*=UTF-8''` + want.sanitized,
			"Content-Digest":         "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":",
			"X-Content-Type-Options": "nosniff",
			"Cache-Control":          "private, no-store",
		} {
			if got := header(resp, name); got != value {
				t.Errorf("content %s: %s got %q, want %q", want.sanitized, name, got, value)
			}
		}
	}
	for _, u := range list().Uploads {
		if u.FetchedAt == nil {
			t.Errorf("list after content: %s has no fetched_at", u.FileID)
		}
	}

	// ack, twice (an at-least-once retry answers the same)
	acked := staged.Files[0].FileID
	for range 2 {
		var ack map[string]any
		wantJSON(t, invokeHTTP(t, rts["ack"], withFileID(readEvent(t, "ack"), acked)), http.StatusOK, &ack)
		if len(ack) != 1 || ack["acked"] != true {
			t.Errorf("ack: got %v, want {\"acked\":true}", ack)
		}
	}
	got = list()
	if len(got.Uploads) != 1 || got.Uploads[0].FileID != staged.Files[1].FileID {
		t.Errorf("list after ack: got %+v, want only %s", got.Uploads, staged.Files[1].FileID)
	}

	// a workspace token, in place of the admin token in the same event
	pool := openPool(t, url)
	tok, _, err := admin.CreateToken(context.Background(), pool, uuid.MustParse(workspacePlaceholder))
	if err != nil {
		t.Fatal(err)
	}
	var wsList listBody
	ev := bytes.ReplaceAll(readEvent(t, "list"), []byte(adminToken), []byte(tok))
	wantJSON(t, invokeHTTP(t, rts["list"], ev), http.StatusOK, &wsList)
	if len(wsList.Uploads) != 1 {
		t.Errorf("list with a workspace token: got %d uploads, want 1", len(wsList.Uploads))
	}

	// the ack event's placeholder file does not exist
	var gone map[string]any
	wantJSON(t, invokeHTTP(t, rts["ack"], readEvent(t, "ack")), http.StatusNotFound, &gone)
	if gone["error"] != "pending upload not found, expired, or already acked" {
		t.Errorf("ack of the placeholder: got %v", gone)
	}

	// presign, without CONTENT_BUCKET
	var presign map[string]any
	wantJSON(t, invokeHTTP(t, rts["presign"], readEvent(t, "presign")), http.StatusNotFound, &presign)
	if presign["error"] != "presigned uploads are not enabled" {
		t.Errorf("presign: got %v, want error \"presigned uploads are not enabled\"", presign)
	}
}

// knownDB is a fresh database in which the events' placeholder workspace
// is known: a token was made for it, as `sam local invoke Admin -e
// events/admin.json` makes one (events/README.md). A workspace no token
// was ever made for is refused on the service's own database
// (ACCEPT_UNKNOWN_WORKSPACES).
func knownDB(t testing.TB) string {
	t.Helper()
	url := pgtest.MustURL(t)
	if _, _, err := admin.CreateToken(context.Background(), openPool(t, url), uuid.MustParse(workspacePlaceholder)); err != nil {
		t.Fatal(err)
	}
	return url
}

func openPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestSweep ages rows by SQL and feeds events/sweep.json to sweep: it
// must delete exactly the acked row past ACK_RETENTION and the unacked row
// past expires_at, answer {"acked":1,"expired":1}, log EMF lines of
// pending_uploads_swept by outcome, and answer zeros when run again.
func TestSweep(t *testing.T) {
	t.Parallel()
	url := pgtest.MustURL(t)
	rt := start(t, "sweep", "DATABASE_URL="+url)
	pool := openPool(t, url)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename, created_at, acked_at, expires_at)
		VALUES
		  ($1, 'x', 1, 'acked-long-ago.txt', now() - interval '3 hours', now() - interval '2 hours', now() + interval '21 hours'),
		  ($1, 'x', 1, 'acked-just-now.txt', now() - interval '3 hours', now(), now() + interval '21 hours'),
		  ($1, 'x', 1, 'acked-and-past-ttl.txt', now() - interval '25 hours', now() - interval '10 minutes', now() - interval '1 hour'),
		  ($1, 'x', 1, 'expired.txt', now() - interval '25 hours', NULL, now() - interval '1 hour'),
		  ($1, 'x', 1, 'fresh.txt', now(), NULL, now() + interval '24 hours')`,
		workspacePlaceholder)
	if err != nil {
		t.Fatalf("age rows: %v", err)
	}

	type result struct {
		Acked   int `json:"acked"`
		Expired int `json:"expired"`
	}
	var got result
	payload := invoke(t, rt, readEvent(t, "sweep"))
	if err := json.Unmarshal(payload, &got); err != nil {
		t.Fatalf("answer %s: %v", payload, err)
	}
	if want := (result{Acked: 1, Expired: 1}); got != want {
		t.Errorf("sweep: got %s, want %+v", payload, want)
	}
	rows, err := pool.Query(ctx, `SELECT filename FROM pending_uploads ORDER BY filename`)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for rows.Next() {
		var name string
		rows.Scan(&name)
		left = append(left, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := "acked-and-past-ttl.txt acked-just-now.txt fresh.txt"; strings.Join(left, " ") != want {
		t.Errorf("rows left: got %v, want %s", left, want)
	}

	var again result
	if err := json.Unmarshal(invoke(t, rt, readEvent(t, "sweep")), &again); err != nil || again != (result{}) {
		t.Errorf("second sweep: got %+v (%v), want zeros", again, err)
	}

	swept := emfCounts(t, rt.Logs(), "pending_uploads_swept", "outcome")
	if swept["acked"] != 1 || swept["expired"] != 1 || swept["error"] != 0 {
		t.Errorf("EMF pending_uploads_swept by outcome: got %v, want acked 1, expired 1, no error", swept)
	}
}

// TestSweepLeavesNoSession: after a run the sweep's process, which
// Lambda freezes until the next run, holds no session on the database:
// one it kept would keep a database that pauses when idle (Aurora
// Serverless v2 at 0 ACU) awake until the server's idle_session_timeout.
// The process is still running here, waiting for its next event, as a
// frozen one would be when thawed.
func TestSweepLeavesNoSession(t *testing.T) {
	t.Parallel()
	url := pgtest.MustURL(t)
	rt := start(t, "sweep", "DATABASE_URL="+url)
	pool := openPool(t, url)
	invoke(t, rt, readEvent(t, "sweep"))
	// The sweep's sessions are named by the pool (application_name); a
	// closed one leaves pg_stat_activity as its backend exits, just after
	// the answer: waited for, at most 10 s, while the idle connection of
	// a process that kept it would stay a minute (MaxConnIdleTime).
	var n int
	for i := 0; i < 400; i++ {
		if err := pool.QueryRow(context.Background(), `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'pendinguploads'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Errorf("after its run the sweep holds %d sessions, want none", n)
}

// TestSweepEssentialMetrics: with METRICS naming one metric (the
// template's Monitoring=essential: the backlog alarm's), the sweep's EMF
// lines are that metric's alone; the rest stay in its log line.
func TestSweepEssentialMetrics(t *testing.T) {
	t.Parallel()
	url := pgtest.MustURL(t)
	rt := start(t, "sweep", "DATABASE_URL="+url, "METRICS="+metrics.BacklogOldestAge)
	invoke(t, rt, readEvent(t, "sweep"))
	// The process's stdout reaches Logs a little after its answer; its
	// EMF lines come before its "swept" line, on the same stdout.
	logs := rt.Logs()
	for i := 0; i < 200 && !strings.Contains(logs, `"msg":"swept"`); i++ {
		time.Sleep(25 * time.Millisecond)
		logs = rt.Logs()
	}
	names := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			AWS *struct {
				CloudWatchMetrics []struct{ Metrics []struct{ Name string } }
			} `json:"_aws"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.AWS == nil {
			continue
		}
		for _, d := range line.AWS.CloudWatchMetrics {
			for _, m := range d.Metrics {
				names[m.Name]++
			}
		}
	}
	if len(names) != 1 || names[metrics.BacklogOldestAge] != 1 {
		t.Errorf("EMF metrics of one sweep: got %v, want %s once", names, metrics.BacklogOldestAge)
	}
	if !strings.Contains(logs, `"backlog_files"`) {
		t.Errorf("the sweep's log line lost its backlog fields:\n%s", logs)
	}
}

// emfCounts sums, over the log's Embedded Metric Format lines for metric,
// its values by the dimension dim. Every EMF line must be well-formed.
func emfCounts(t testing.TB, logs, metric, dim string) map[string]float64 {
	t.Helper()
	sums := make(map[string]float64)
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]json.RawMessage
		if json.Unmarshal(sc.Bytes(), &line) != nil || line["_aws"] == nil || line[metric] == nil {
			continue
		}
		var meta struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		}
		if err := json.Unmarshal(line["_aws"], &meta); err != nil || meta.Timestamp == 0 || len(meta.CloudWatchMetrics) != 1 {
			t.Errorf("EMF line %s: bad _aws (%v)", sc.Bytes(), err)
			continue
		}
		d := meta.CloudWatchMetrics[0]
		if d.Namespace != "PendingUploads" || len(d.Metrics) != 1 || d.Metrics[0].Name != metric ||
			d.Metrics[0].Unit != "Count" || len(d.Dimensions) != 1 || strings.Join(d.Dimensions[0], ",") != dim {
			t.Errorf("EMF line %s: got directive %+v", sc.Bytes(), d)
		}
		var key string
		var value float64
		if json.Unmarshal(line[dim], &key) != nil || json.Unmarshal(line[metric], &value) != nil {
			t.Errorf("EMF line %s: no %s or value", sc.Bytes(), dim)
		}
		sums[key] += value
		lines++
	}
	if lines == 0 {
		t.Errorf("no EMF line of %s in the logs:\n%s", metric, logs)
	}
	return sums
}

// cfnServer stands in for CloudFormation's pre-signed ResponseURL on a
// loopback port. It answers 200 and hands each request's method and body
// to the returned channel.
func cfnServer(t testing.TB) (string, <-chan cfnPut) {
	t.Helper()
	puts := make(chan cfnPut, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		puts <- cfnPut{method: r.Method, path: r.URL.Path, body: b}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/cloudformation-response", puts
}

type cfnPut struct {
	method, path string
	body         []byte
}

// migrateEvent returns events/migrate.json with ResponseURL set to url
// and, unless it is Create, RequestType and PhysicalResourceId set as
// CloudFormation sends them for an existing resource.
func migrateEvent(t testing.TB, url string, requestType cfn.RequestType) []byte {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal(readEvent(t, "migrate"), &ev); err != nil {
		t.Fatal(err)
	}
	ev["ResponseURL"] = url
	ev["RequestType"] = string(requestType)
	if requestType != cfn.RequestCreate {
		ev["PhysicalResourceId"] = "pendinguploads-schema"
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runMigrate starts migrate with env, invokes it with the event and
// returns the response it PUT to the ResponseURL, which must arrive
// within migrateAnswerBound of the invocation.
func runMigrate(t testing.TB, requestType cfn.RequestType, env ...string) cfn.Response {
	t.Helper()
	return runMigrateWithin(t, migrateAnswerBound, requestType, env...)
}

// runMigrateWithin is runMigrate with the answer bounded by bound.
func runMigrateWithin(t testing.TB, bound time.Duration, requestType cfn.RequestType, env ...string) cfn.Response {
	t.Helper()
	url, puts := cfnServer(t)
	rt := start(t, "migrate", env...)
	began := time.Now()
	invoke(t, rt, migrateEvent(t, url, requestType))
	var put cfnPut
	select {
	case put = <-puts:
	default:
		t.Fatalf("migrate answered without a PUT to the ResponseURL; logs:\n%s", rt.Logs())
	}
	if took := time.Since(began); took > bound {
		t.Errorf("the answer took %v, want at most %v", took, bound)
	}
	if put.method != http.MethodPut || put.path != "/cloudformation-response" {
		t.Errorf("response: got %s %s, want PUT /cloudformation-response", put.method, put.path)
	}
	var resp cfn.Response
	if err := json.Unmarshal(put.body, &resp); err != nil {
		t.Fatalf("response %s: %v", put.body, err)
	}
	var sample cfn.Event
	json.Unmarshal(readEvent(t, "migrate"), &sample)
	if resp.RequestID != sample.RequestID || resp.StackID != sample.StackID || resp.LogicalResourceID != sample.LogicalResourceID {
		t.Errorf("response %s does not echo the request's RequestId, StackId, LogicalResourceId", put.body)
	}
	if resp.PhysicalResourceID != "pendinguploads-schema" {
		t.Errorf("PhysicalResourceId: got %q, want pendinguploads-schema", resp.PhysicalResourceID)
	}
	return resp
}

// migrateAnswerBound bounds how long migrate may take to answer
// CloudFormation when it cannot start: seconds, not the custom resource's
// ServiceTimeout.
const migrateAnswerBound = 15 * time.Second

// secretsManagerNotFound stands in for Secrets Manager on a loopback port:
// every call is answered 400 ResourceNotFoundException, in the service's
// JSON protocol, as for a secret that does not exist.
func secretsManagerNotFound(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"__type":"ResourceNotFoundException","Message":"Secrets Manager can't find the specified secret."}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// secretEnv is the environment of a function whose database is the
// secret DB_SECRET_ARN, read from Secrets Manager at endpoint.
func secretEnv(endpoint string) []string {
	return []string{
		"DB_SECRET_ARN=arn:aws:secretsmanager:us-east-1:123456789012:secret:pendinguploads-db-AbCdEf",
		"SECRETS_MANAGER_ENDPOINT=" + endpoint,
		"AWS_ACCESS_KEY_ID=AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY=not-a-real-key",
	}
}

// deadDatabaseURL returns a URL of a loopback port nobody listens on, with
// a short connect_timeout.
func deadDatabaseURL(t testing.TB) string {
	t.Helper()
	return "postgres://pendinguploads:secret@" + closedAddr(t) + "/pendinguploads?sslmode=disable&connect_timeout=2"
}

// TestMigrate feeds events/migrate.json (its ResponseURL pointed at a
// loopback server) to migrate: Create on an empty database migrates it to
// migrations.Latest and PUTs SUCCESS with Data.Version; Create against a
// dead database PUTs FAILED with a reason; Delete PUTs SUCCESS and leaves
// schema and rows alone, even with the database down. A function that
// cannot be set up (its secret unreadable, a setting missing or bad)
// still starts and answers: Create and Update FAILED with a reason naming
// the problem, Delete SUCCESS, within seconds.
func TestMigrate(t *testing.T) {
	t.Parallel()
	t.Run("CreateSuccess", func(t *testing.T) {
		t.Parallel()
		url := pgtest.MustEmptyURL(t)
		resp := runMigrate(t, cfn.RequestCreate, "DATABASE_URL="+url)
		if resp.Status != cfn.StatusSuccess {
			t.Fatalf("Status: got %s (%s), want SUCCESS", resp.Status, resp.Reason)
		}
		if v, _ := resp.Data["Version"].(float64); v != migrations.Latest {
			t.Errorf("Data.Version: got %v, want %d", resp.Data["Version"], migrations.Latest)
		}
		v, dirty, err := migrations.Version(context.Background(), url)
		if err != nil || dirty || v != migrations.Latest {
			t.Errorf("database version: got %d dirty=%v (%v), want %d", v, dirty, err, migrations.Latest)
		}
	})
	t.Run("CreateFailed", func(t *testing.T) {
		t.Parallel()
		// A dead database fails the deploy once the wait for a paused one
		// (lambdafn.DatabaseWait) is spent: within a minute, not the
		// custom resource's ServiceTimeout.
		resp := runMigrateWithin(t, lambdafn.DatabaseWait+migrateAnswerBound, cfn.RequestCreate, "DATABASE_URL="+deadDatabaseURL(t))
		if resp.Status != cfn.StatusFailed || resp.Reason == "" {
			t.Errorf("got Status %s, Reason %q; want FAILED with a reason", resp.Status, resp.Reason)
		}
		if strings.Contains(resp.Reason, "secret") {
			t.Errorf("Reason %q carries the database password", resp.Reason)
		}
	})
	t.Run("DeleteLeavesSchema", func(t *testing.T) {
		t.Parallel()
		url := pgtest.MustURL(t)
		pool := openPool(t, url)
		ctx := context.Background()
		if _, err := pool.Exec(ctx, `INSERT INTO pending_uploads (workspace_id, content, size_bytes, filename) VALUES ($1, 'x', 1, 'kept.txt')`, workspacePlaceholder); err != nil {
			t.Fatal(err)
		}
		resp := runMigrate(t, cfn.RequestDelete, "DATABASE_URL="+url)
		if resp.Status != cfn.StatusSuccess {
			t.Fatalf("Status: got %s (%s), want SUCCESS", resp.Status, resp.Reason)
		}
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pending_uploads`).Scan(&n); err != nil || n != 1 {
			t.Errorf("rows after Delete: got %d (%v), want 1", n, err)
		}
		v, dirty, err := migrations.Version(ctx, url)
		if err != nil || dirty || v != migrations.Latest {
			t.Errorf("version after Delete: got %d dirty=%v (%v), want %d", v, dirty, err, migrations.Latest)
		}
	})
	t.Run("DeleteWithDatabaseDown", func(t *testing.T) {
		t.Parallel()
		resp := runMigrate(t, cfn.RequestDelete, "DATABASE_URL="+deadDatabaseURL(t))
		if resp.Status != cfn.StatusSuccess {
			t.Errorf("Status: got %s (%s), want SUCCESS: Delete must not touch the database", resp.Status, resp.Reason)
		}
	})
	// The function cannot be set up: it still starts, and answers.
	cannotStart := []struct {
		name, want string // want: in the reason
		env        []string
	}{
		{"SecretNotFound", "ResourceNotFoundException", secretEnv(secretsManagerNotFound(t))},
		{"SecretsManagerDown", "DB_SECRET_ARN", secretEnv("http://" + closedAddr(t))},
		{"NoDatabaseSetting", "DATABASE_URL", nil},
		{"BadSetting", "UPLOAD_TTL", []string{"DATABASE_URL=" + deadDatabaseURL(t), "UPLOAD_TTL=abc"}},
	}
	for _, c := range cannotStart {
		t.Run("Create/"+c.name, func(t *testing.T) {
			t.Parallel()
			resp := runMigrate(t, cfn.RequestCreate, c.env...)
			if resp.Status != cfn.StatusFailed || !strings.Contains(resp.Reason, c.want) {
				t.Errorf("got Status %s, Reason %q; want FAILED with a reason naming %s", resp.Status, resp.Reason, c.want)
			}
			if c.name == "SecretNotFound" && !strings.Contains(resp.Reason, "DB_SECRET_ARN") {
				t.Errorf("Reason %q does not name DB_SECRET_ARN", resp.Reason)
			}
			if strings.Contains(resp.Reason, "not-a-real-key") {
				t.Errorf("Reason %q carries the AWS secret key", resp.Reason)
			}
		})
		t.Run("Delete/"+c.name, func(t *testing.T) {
			t.Parallel()
			resp := runMigrate(t, cfn.RequestDelete, c.env...)
			if resp.Status != cfn.StatusSuccess {
				t.Errorf("Status: got %s (%s), want SUCCESS: Delete leaves the schema, and needs nothing", resp.Status, resp.Reason)
			}
		})
	}
	t.Run("Update/SecretNotFound", func(t *testing.T) {
		t.Parallel()
		resp := runMigrate(t, cfn.RequestUpdate, secretEnv(secretsManagerNotFound(t))...)
		if resp.Status != cfn.StatusFailed || !strings.Contains(resp.Reason, "DB_SECRET_ARN") {
			t.Errorf("got Status %s, Reason %q; want FAILED naming DB_SECRET_ARN", resp.Status, resp.Reason)
		}
	})
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestInitFailures starts functions with a setting missing or bad: each
// must fail its init (exit 1 before asking for an event) with output that
// names the variable.
func TestInitFailures(t *testing.T) {
	t.Parallel()
	// Never dialled: the pool connects lazily, and init fails first.
	const dbURL = "DATABASE_URL=postgres://u@127.0.0.1:1/db?connect_timeout=1"
	type tc struct {
		name, fn, want string
		env            []string
	}
	var cases []tc
	for _, fn := range httpFunctions {
		cases = append(cases, tc{"NoAdminToken/" + fn, fn, "ADMIN_TOKEN", []string{dbURL}})
	}
	cases = append(cases,
		tc{"ShortAdminToken/upload", "upload", "ADMIN_TOKEN", []string{dbURL, "ADMIN_TOKEN=short"}},
		tc{"BadAdminTokenSHA256/list", "list", "ADMIN_TOKEN_SHA256", []string{dbURL, "ADMIN_TOKEN_SHA256=" + adminToken}},
		tc{"AdminTokenAndSHA256/ack", "ack", "ADMIN_TOKEN_SHA256", []string{dbURL, "ADMIN_TOKEN=" + adminToken,
			"ADMIN_TOKEN_SHA256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}},
		tc{"NoDatabaseURL/sweep", "sweep", "DATABASE_URL", nil},
		tc{"NoDatabaseURL/list", "list", "DATABASE_URL", []string{"ADMIN_TOKEN=" + adminToken}},
		tc{"BadUploadTTL/upload", "upload", "UPLOAD_TTL", []string{dbURL, "ADMIN_TOKEN=" + adminToken, "UPLOAD_TTL=abc"}},
		tc{"BadUploadTTL/sweep", "sweep", "UPLOAD_TTL", []string{dbURL, "UPLOAD_TTL=abc"}},
		tc{"BadAckRetention/sweep", "sweep", "ACK_RETENTION", []string{dbURL, "ACK_RETENTION=1 hour"}},
		tc{"ShortLinkKey/content", "content", "DOWNLOAD_LINK_KEY", []string{dbURL, "ADMIN_TOKEN=" + adminToken, "DOWNLOAD_LINK_KEY=short"}},
		tc{"BadLinkTTL/content", "content", "DOWNLOAD_LINK_TTL", []string{dbURL, "ADMIN_TOKEN=" + adminToken, "DOWNLOAD_LINK_KEY=" + linkKey, "DOWNLOAD_LINK_TTL=2h"}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rt := start(t, c.fn, c.env...)
			ctx, cancel := context.WithTimeout(context.Background(), invokeTimeout)
			defer cancel()
			err := rt.WaitInit(ctx)
			var ie *lambdatest.InitError
			if !errors.As(err, &ie) {
				t.Fatalf("WaitInit: got %v, want an init failure", err)
			}
			if ie.ExitCode != 1 {
				t.Errorf("exit status: got %d, want 1", ie.ExitCode)
			}
			if !strings.Contains(ie.Output, c.want) {
				t.Errorf("output does not name %s:\n%s", c.want, ie.Output)
			}
			if !json.Valid([]byte(strings.TrimSpace(ie.Output))) {
				t.Errorf("output is not one JSON line:\n%s", ie.Output)
			}
			if strings.Contains(ie.Output, "secret") {
				t.Errorf("output carries a secret:\n%s", ie.Output)
			}
		})
	}
}
