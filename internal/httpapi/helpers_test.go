package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// Messages of API.md.
const (
	msgMissing = "missing workspace auth token"
	// A token sent without "Bearer ".
	msgNoScheme   = `missing workspace auth token: the Authorization header has no Bearer scheme (send Authorization: Bearer TOKEN)`
	msgInvalid    = "invalid workspace auth token"
	msgUnanchored = "org token without an anchor workspace"
	msgBadWS      = "invalid workspace ID"
	msgBadFile    = "invalid file_id"
	msgMalformed  = "malformed multipart body"
	msgNoFiles    = "no files field in request"
	msgTooMany    = "too many files (limit 64)"
	msgEmpty      = "empty file"
	msgFileCap    = "file exceeds per-file cap"
	msgBodyCap    = "request body too large"
	// A multipart upload's, with the next step (with a bucket: presign).
	msgFilesCap        = "request body too large: send the files in requests under max bytes"
	msgFilesCapPresign = msgFilesCap + ", or each through POST /workspaces/{workspaceId}/chat/uploads/presign"
	msgGone            = "pending upload not found, expired, or already acked"
	msgExpired         = "pending upload not found or expired"
	msgStorage         = "storage error"
	msgPresignOff      = "presigned uploads are not enabled"
	msgLinkInvalid     = "invalid download link: ask for a new link (POST /workspaces/{workspaceId}/pending-uploads/{fileId}/link, or pendingctl link FILE_ID)"
	msgLinkExpired     = "download link expired: ask for a new link (POST /workspaces/{workspaceId}/pending-uploads/{fileId}/link, or pendingctl link FILE_ID)"
)

// codeOf is the code API.md gives each message: every error body carries
// it beside the message (wantError checks it).
var codeOf = map[string]string{
	msgMissing:         "missing_token",
	msgNoScheme:        "missing_token",
	msgInvalid:         "invalid_token",
	msgUnanchored:      "org_token_unanchored",
	msgBadWS:           "bad_workspace_id",
	msgBadFile:         "bad_file_id",
	msgMalformed:       "malformed_multipart",
	msgNoFiles:         "no_files",
	msgTooMany:         "too_many_files",
	msgEmpty:           "empty_file",
	msgFileCap:         "file_too_large",
	msgBodyCap:         "request_too_large",
	msgFilesCap:        "request_too_large",
	msgFilesCapPresign: "request_too_large",
	msgGone:            "file_not_found",
	msgExpired:         "file_not_found",
	msgStorage:         "internal",
	msgPresignOff:      "presign_disabled",

	"cross-origin request refused":             "forbidden_origin",
	"storage unavailable, retry shortly":       "unavailable",
	"workspace busy, retry shortly":            "unavailable",
	"session check unavailable, retry shortly": "unavailable",
	"not found":                                 "not_found",
	"method not allowed":                        "method_not_allowed",
	"workspace not found":                       "workspace_not_found",
	"invalid query string":                      "bad_query",
	"unknown query parameter":                   "unknown_param",
	"invalid query parameter (only redirect=1)": "unknown_param",
	"invalid limit (want 1 to 100)":             "bad_limit",
	"invalid cursor":                            "bad_cursor",
	"range not satisfiable":                     "range_not_satisfiable",
	"malformed JSON body":                       "malformed_json",
	"invalid upload_id":                         "bad_upload_id",
	"duplicate upload_id":                       "duplicate_upload_id",
	"upload not found":                          "upload_not_found",
	"not a multipart upload":                    "not_multipart",
	"upload not received":                       "upload_not_received",
	"upload already committed":                  "upload_committed",
	"workspace quota exceeded":                  "quota_exceeded",
	"invalid sha256 (want 64 hex digits)":       "bad_sha256",
	"invalid parts (want one sha256 per part of part_bytes, for a multipart file)": "bad_parts",
	msgLinkInvalid: "link_invalid",
	msgLinkExpired: "link_expired",
}

const maxFileBytes = 26214400

// result is a response, read in full.
type result struct {
	status int
	header http.Header
	body   []byte
}

func TestMain(m *testing.M) { testkit.Main(m) }

// server is what a handler test runs against: the whole service on
// Postgres (apptest.Server), or the handlers over the in-memory fake
// (fakeServer, fake_test.go) for what is HTTP's own behaviour.
type server interface{ *apptest.Server | *fakeServer }

// baseURL is srv's base URL, no trailing slash.
func baseURL[S server](srv S) string {
	if s, ok := any(srv).(*fakeServer); ok {
		return s.URL
	}
	return any(srv).(*apptest.Server).URL
}

func uploadsURL[S server](srv S, ws string) string {
	return baseURL(srv) + "/workspaces/" + ws + "/chat/uploads"
}

func presignURL[S server](srv S, ws string) string {
	return baseURL(srv) + "/workspaces/" + ws + "/chat/uploads/presign"
}

func listURL[S server](srv S, ws string) string {
	return baseURL(srv) + "/workspaces/" + ws + "/pending-uploads"
}

func contentURL[S server](srv S, ws, id string) string {
	return baseURL(srv) + "/workspaces/" + ws + "/pending-uploads/" + id + "/content"
}

func ackURL[S server](srv S, ws, id string) string {
	return baseURL(srv) + "/workspaces/" + ws + "/pending-uploads/" + id + "/ack"
}

// newRequest builds a request with "Authorization: Bearer token" (none
// when token is "") and Content-Type ctype (none when "").
func newRequest(t *testing.T, method, u, token, ctype string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	return req
}

// send does req and reads the whole response, failing after 30 s.
func send(t *testing.T, req *http.Request) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL.Path, err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b}
}

func get(t *testing.T, u, token string) result {
	t.Helper()
	return send(t, newRequest(t, "GET", u, token, "", nil))
}

func post(t *testing.T, u, token, ctype string, body []byte) result {
	t.Helper()
	return send(t, newRequest(t, "POST", u, token, ctype, bytes.NewReader(body)))
}

// rawRequest writes head (request line and headers, without the blank
// line) and body on a fresh connection, half-closes it when closeWrite,
// and reads the response: for bodies no well-behaved client sends.
func rawRequest[S server](t *testing.T, srv S, head string, body []byte, closeWrite bool) result {
	t.Helper()
	u, _ := url.Parse(baseURL(srv))
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, strings.ReplaceAll(head, "\n", "\r\n")+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(body); err != nil {
		t.Fatal(err)
	}
	if closeWrite {
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("raw request: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("raw request: read body: %v", err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b}
}

// jsonObject decodes an object body, numbers as json.Number.
func jsonObject(t *testing.T, b []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return m
}

// keys returns the sorted keys of m.
func keys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// wantStatus fails the test unless res has status.
func wantStatus(t *testing.T, res result, status int) {
	t.Helper()
	if res.status != status {
		t.Fatalf("status: got %d, want %d (body %.300q)", res.status, status, res.body)
	}
}

// wantError checks that res is exactly the JSON error {"error": msg,
// "code": codeOf[msg]} plus extra fields, with status and Content-Type:
// application/json, and a 503 with Retry-After: 5 (1 for a busy
// workspace, whose turn comes sooner than a dependency's recovery).
func wantError(t *testing.T, res result, status int, msg string, extra map[string]any) {
	t.Helper()
	wantStatus(t, res, status)
	if got := res.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type: got %q, want %q", got, "application/json")
	}
	if status == http.StatusServiceUnavailable {
		want := "5"
		if msg == "workspace busy, retry shortly" {
			want = "1"
		}
		if got := res.header.Get("Retry-After"); got != want {
			t.Errorf("Retry-After of a 503 %q: got %q, want %s", msg, got, want)
		}
	}
	body := jsonObject(t, res.body)
	code, ok := codeOf[msg]
	if !ok {
		t.Fatalf("no code for %q in codeOf", msg)
	}
	want := map[string]any{"error": msg, "code": code}
	for k, v := range extra {
		want[k] = v
	}
	if got, w := keys(body), keys(want); !slices.Equal(got, w) {
		t.Errorf("error body fields: got %v, want %v (body %s)", got, w, res.body)
	}
	for k, v := range want {
		if got := fmt.Sprint(body[k]); got != fmt.Sprint(v) {
			t.Errorf("error body %q: got %v, want %v", k, got, v)
		}
	}
}

// part is one part of a multipart body.
type part struct {
	field    string // form name; "files" when ""
	filename string // the raw filename parameter
	text     bool   // a text value: no filename parameter at all
	ctype    string // the part's Content-Type; no header when ""
	content  []byte
	// disposition, when set, is the whole Content-Disposition header,
	// in place of one built from field and filename.
	disposition string
}

func file(name, ctype, content string) part {
	return part{filename: name, ctype: ctype, content: []byte(content)}
}

// quote escapes s for a quoted-string parameter.
func quote(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// form encodes parts as multipart/form-data, writing each filename as
// given (no base name taken, no sanitizing) and returns the body and the
// request's Content-Type.
func form(t *testing.T, parts ...part) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		field := p.field
		if field == "" {
			field = "files"
		}
		h := textproto.MIMEHeader{}
		cd := fmt.Sprintf(`form-data; name="%s"`, quote(field))
		if !p.text {
			cd += fmt.Sprintf(`; filename="%s"`, quote(p.filename))
		}
		if p.disposition != "" {
			cd = p.disposition
		}
		h.Set("Content-Disposition", cd)
		if p.ctype != "" {
			h.Set("Content-Type", p.ctype)
		}
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(p.content); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), mw.FormDataContentType()
}

// stagedFile is one file of upload's success body.
type stagedFile struct {
	FileID   string `json:"file_id"`
	URI      string `json:"uri"`
	Name     string `json:"name"`
	MimeType string `json:"mimeType"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
}

// uploadParts uploads parts to ws with token and returns the staged files,
// failing unless the answer is 200.
func uploadParts[S server](t *testing.T, srv S, ws, token string, parts ...part) []stagedFile {
	t.Helper()
	body, ctype := form(t, parts...)
	res := post(t, uploadsURL(srv, ws), token, ctype, body)
	wantStatus(t, res, http.StatusOK)
	var out struct {
		Files []stagedFile `json:"files"`
	}
	if err := json.Unmarshal(res.body, &out); err != nil {
		t.Fatalf("decode %s: %v", res.body, err)
	}
	if len(out.Files) != len(parts) {
		t.Fatalf("files: got %d, want %d", len(out.Files), len(parts))
	}
	return out.Files
}

// stage uploads one file with the admin token and returns it.
func stage(t *testing.T, srv *apptest.Server, ws uuid.UUID, name, ctype, content string) stagedFile {
	t.Helper()
	return uploadParts(t, srv, ws.String(), srv.AdminToken, file(name, ctype, content))[0]
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// sqlCount runs a count(*) query.
func sqlCount(t *testing.T, srv *apptest.Server, q string, args ...any) int {
	t.Helper()
	var n int
	if err := srv.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// sqlExec runs a statement.
func sqlExec(t *testing.T, srv *apptest.Server, q string, args ...any) {
	t.Helper()
	if _, err := srv.Pool.Exec(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// rowCounts returns how many pending_uploads and activity_logs rows ws
// has (on the fake: its files, twice).
func rowCounts[S server](t *testing.T, srv S, ws uuid.UUID) (uploads, activity int) {
	t.Helper()
	if f, ok := any(srv).(*fakeServer); ok {
		n := f.Store.filesOf(ws)
		return n, n
	}
	s := any(srv).(*apptest.Server)
	return sqlCount(t, s, `SELECT count(*) FROM pending_uploads WHERE workspace_id = $1`, ws),
		sqlCount(t, s, `SELECT count(*) FROM activity_logs WHERE workspace_id = $1`, ws)
}

// wantNothingStored fails unless ws has no row in either table; on the
// fake, unless the handlers asked nothing of the store for ws but a
// token's check (a refusal the HTTP layer gives reaches no storage).
func wantNothingStored[S server](t *testing.T, srv S, ws uuid.UUID) {
	t.Helper()
	if f, ok := any(srv).(*fakeServer); ok {
		if calls := f.Store.callsFor(ws); len(calls) != 0 {
			t.Errorf("store calls for %s: got %v, want none but Verify", ws, calls)
		}
		return
	}
	if u, a := rowCounts(t, srv, ws); u != 0 || a != 0 {
		t.Errorf("rows stored (pending_uploads, activity_logs): got (%d, %d), want (0, 0)", u, a)
	}
}

// timestamps returns fetched_at and acked_at of a row.
func timestamps(t *testing.T, srv *apptest.Server, id string) (fetched, acked *time.Time) {
	t.Helper()
	err := srv.Pool.QueryRow(context.Background(),
		`SELECT fetched_at, acked_at FROM pending_uploads WHERE file_id = $1`, id).Scan(&fetched, &acked)
	if err != nil {
		t.Fatalf("timestamps of %s: %v", id, err)
	}
	return fetched, acked
}

// expire moves a row's expires_at into the past.
func expire(t *testing.T, srv *apptest.Server, id string) {
	t.Helper()
	sqlExec(t, srv, `UPDATE pending_uploads SET expires_at = now() - interval '1 second' WHERE file_id = $1`, id)
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stageOne stages one file as the upload handler does.
func stageOne(srv *apptest.Server, ws uuid.UUID, data []byte, name, mimetype string) (pendinguploads.Record, error) {
	recs, err := srv.Store.Stage(context.Background(), auth.AdminIdentity(), ws, []pendinguploads.File{{Content: data, Filename: name, Mimetype: mimetype}})
	if err != nil {
		return pendinguploads.Record{}, err
	}
	return recs[0], nil
}

// functionHandler is the handler of one Lambda function: the routes of
// the table that name it, as its main serves them.
func functionHandler[S server](srv S, function string) http.Handler {
	if f, ok := any(srv).(*fakeServer); ok {
		return f.API.Handler(httpapi.RoutesOf(function)...)
	}
	return any(srv).(*apptest.Server).App.API.Handler(httpapi.RoutesOf(function)...)
}
