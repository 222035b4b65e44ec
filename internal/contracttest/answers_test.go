package contracttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// checker validates recorded answers against openapi.yaml, served at base.
type checker struct {
	t      *testing.T
	router routers.Router
	seen   map[string]bool // "METHOD path status" validated
}

func newChecker(t *testing.T, base string) *checker {
	t.Helper()
	doc := loadDocument(t)
	// Route the test server's URLs: the document's own server is API
	// Gateway's stage URL.
	doc.Servers = openapi3.Servers{{URL: base}}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &checker{t: t, router: r, seen: map[string]bool{}}
}

// answer is one recorded exchange.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends req, records the answer (never following a redirect), checks
// its status is want, and validates it against the document: the status
// must be declared for the operation, and its headers and body must match
// the declared ones.
func (c *checker) do(name string, req *http.Request, want int) answer {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
	defer cancel()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		c.t.Fatalf("%s: %v", name, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatalf("%s: read: %v", name, err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header, body: body}
	if a.status != want {
		c.t.Errorf("%s: status %d, want %d (body %s)", name, a.status, want, body)
	}
	c.validate(name, req, a)
	return a
}

func (c *checker) validate(name string, req *http.Request, a answer) {
	c.t.Helper()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		c.t.Errorf("%s: %s %s is not an operation of openapi.yaml: %v", name, req.Method, req.URL.Path, err)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: params,
			Route:      route,
		},
		Status: a.status,
		Header: a.header,
		Body:   io.NopCloser(bytes.NewReader(a.body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true, // an undeclared status is an error
			MultiError:            true,
		},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		c.t.Errorf("%s: %s %s answered %d %s, which openapi.yaml does not allow:\n%v", name, req.Method, route.Path, a.status, a.body, err)
	}
	c.seen[fmt.Sprintf("%s %s %d", req.Method, route.Path, a.status)] = true
}

func request(t *testing.T, method, u, token, ctype string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
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

type part struct{ name, ctype, content string }

func multipartBody(t *testing.T, parts ...part) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="files"; filename=%q`, p.name))
		if p.ctype != "" {
			h.Set("Content-Type", p.ctype)
		}
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, p.content)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), mw.FormDataContentType()
}

func decode[T any](t *testing.T, name string, a answer) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatalf("%s: decode %s: %v", name, a.body, err)
	}
	return v
}

type staged struct {
	Files []struct {
		FileID string `json:"file_id"`
	} `json:"files"`
}

// TestAnswersMatchDocument records the real handlers' answers, over a
// real Postgres and a bucket on moto, and validates each against
// openapi.yaml: every route's success and the 400/401/404/409/413/503
// answers of API.md.
func TestAnswersMatchDocument(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{
		// Small caps, so that a bucket-held file and a 413 are cheap.
		"INLINE_MAX_BYTES":     "1024",
		"MAX_REQUEST_BYTES":    "65536",
		"CORS_ALLOWED_ORIGINS": "https://canvas.example.com",
	}})
	c := newChecker(t, srv.URL)
	ws := uuid.New()
	wss := ws.String()
	tok := srv.WorkspaceToken(t, ws)
	other := srv.WorkspaceToken(t, uuid.New())
	base := srv.URL + "/workspaces/" + wss

	// upload, multipart: one inline text file, one bucket-held file.
	big := strings.Repeat("b", 2000)
	body, ctype := multipartBody(t, part{"hello world.txt", "text/plain", "hello"}, part{"big.bin", "", big})
	up := c.do("upload 200", request(t, "POST", base+"/chat/uploads", tok, ctype, body), http.StatusOK)
	files := decode[staged](t, "upload", up).Files
	if len(files) != 2 {
		t.Fatalf("upload: got %d files, want 2", len(files))
	}
	small, inBucket := files[0].FileID, files[1].FileID

	body, ctype = multipartBody(t, part{"empty.txt", "text/plain", ""})
	c.do("upload empty file", request(t, "POST", base+"/chat/uploads", tok, ctype, body), http.StatusBadRequest)
	c.do("upload not multipart", request(t, "POST", base+"/chat/uploads", tok, "text/plain", []byte("x")), http.StatusBadRequest)
	var nf bytes.Buffer
	mw := multipart.NewWriter(&nf)
	_ = mw.WriteField("other", "x")
	_ = mw.Close()
	c.do("upload no files field", request(t, "POST", base+"/chat/uploads", tok, mw.FormDataContentType(), nf.Bytes()), http.StatusBadRequest)
	body, ctype = multipartBody(t, part{"huge.bin", "", strings.Repeat("h", 70000)})
	c.do("upload request body too large", request(t, "POST", base+"/chat/uploads", tok, ctype, body), http.StatusRequestEntityTooLarge)
	c.do("upload no token", request(t, "POST", base+"/chat/uploads", "", ctype, body), http.StatusUnauthorized)
	c.do("upload another workspace's token", request(t, "POST", base+"/chat/uploads", other, ctype, body), http.StatusUnauthorized)
	c.do("upload bad workspace ID", request(t, "POST", srv.URL+"/workspaces/nope/chat/uploads", srv.AdminToken, ctype, body), http.StatusBadRequest)

	// presign, then the JSON commit: 200 once the bytes are in the bucket,
	// 409 when they are not.
	pres := c.do("presign 200", request(t, "POST", base+"/chat/uploads/presign", tok, "application/json",
		[]byte(`{"files":[{"name":"p.bin","size":5,"mimeType":"application/octet-stream"},{"name":"q.bin","size":3}]}`)), http.StatusOK)
	uploads := decode[struct {
		Uploads []struct {
			UploadID string            `json:"upload_id"`
			URL      string            `json:"url"`
			Headers  map[string]string `json:"headers"`
		} `json:"uploads"`
	}](t, "presign", pres).Uploads
	if len(uploads) != 2 {
		t.Fatalf("presign: got %d uploads, want 2", len(uploads))
	}
	put(t, uploads[0].URL, uploads[0].Headers, []byte("hello"))
	c.do("commit 409", request(t, "POST", base+"/chat/uploads", tok, "application/json",
		[]byte(`{"files":[{"upload_id":"`+uploads[1].UploadID+`"}]}`)), http.StatusConflict)
	c.do("commit 200", request(t, "POST", base+"/chat/uploads", tok, "application/json",
		[]byte(`{"files":[{"upload_id":"`+uploads[0].UploadID+`"}]}`)), http.StatusOK)
	c.do("presign per-file cap", request(t, "POST", base+"/chat/uploads/presign", tok, "application/json",
		[]byte(`{"files":[{"name":"p.bin","size":999999999999}]}`)), http.StatusRequestEntityTooLarge)
	c.do("presign malformed JSON", request(t, "POST", base+"/chat/uploads/presign", tok, "application/json", []byte(`{"files":`)), http.StatusBadRequest)
	c.do("presign no token", request(t, "POST", base+"/chat/uploads/presign", "", "application/json", []byte(`{}`)), http.StatusUnauthorized)

	// list
	c.do("list 200 with a next page", request(t, "GET", base+"/pending-uploads?limit=1", tok, "", nil), http.StatusOK)
	c.do("list 200 last page", request(t, "GET", base+"/pending-uploads", tok, "", nil), http.StatusOK)
	c.do("list 200 empty", request(t, "GET", srv.URL+"/workspaces/"+uuid.NewString()+"/pending-uploads", srv.AdminToken, "", nil), http.StatusOK)
	c.do("list bad limit", request(t, "GET", base+"/pending-uploads?limit=0", tok, "", nil), http.StatusBadRequest)
	c.do("list bad cursor", request(t, "GET", base+"/pending-uploads?after=%25zz", tok, "", nil), http.StatusBadRequest)
	c.do("list invalid token", request(t, "GET", base+"/pending-uploads", "pu_nothing", "", nil), http.StatusUnauthorized)

	// content
	got := c.do("content 200", request(t, "GET", base+"/pending-uploads/"+small+"/content", tok, "", nil), http.StatusOK)
	if string(got.body) != "hello" {
		t.Errorf("content: got %q, want hello", got.body)
	}
	c.do("content 200 from the bucket", request(t, "GET", base+"/pending-uploads/"+inBucket+"/content", tok, "", nil), http.StatusOK)
	c.do("content 307", request(t, "GET", base+"/pending-uploads/"+inBucket+"/content?redirect=1", tok, "", nil), http.StatusTemporaryRedirect)
	c.do("content bad query", request(t, "GET", base+"/pending-uploads/"+inBucket+"/content?redirect=yes", tok, "", nil), http.StatusBadRequest)
	c.do("content 404", request(t, "GET", base+"/pending-uploads/"+uuid.NewString()+"/content", tok, "", nil), http.StatusNotFound)
	c.do("content bad file_id", request(t, "GET", base+"/pending-uploads/nope/content", tok, "", nil), http.StatusBadRequest)
	c.do("content no token", request(t, "GET", base+"/pending-uploads/"+small+"/content", "", "", nil), http.StatusUnauthorized)
	if got.header.Get("Accept-Ranges") != "bytes" {
		t.Errorf("content 200: Accept-Ranges %q, want bytes", got.header.Get("Accept-Ranges"))
	}
	ranged := request(t, "GET", base+"/pending-uploads/"+small+"/content", tok, "", nil)
	ranged.Header.Set("Range", "bytes=1-2")
	if a := c.do("content Range", ranged, http.StatusPartialContent); string(a.body) != "el" {
		t.Errorf("content Range bytes=1-2: got %q, want el", a.body)
	}
	unsat := request(t, "GET", base+"/pending-uploads/"+small+"/content", tok, "", nil)
	unsat.Header.Set("Range", "bytes=100-")
	c.do("content unsatisfiable Range", unsat, http.StatusRequestedRangeNotSatisfiable)

	// link, and the download route: every answer class, each with
	// Referrer-Policy as the document requires.
	minted := decode[struct {
		URL string `json:"url"`
	}](t, "link", c.do("link 200", request(t, "POST", base+"/pending-uploads/"+small+"/link", tok, "", nil), http.StatusOK))
	link := base + "/pending-uploads/" + small + "/" + minted.URL
	c.do("download 200", request(t, "GET", link, "", "", nil), http.StatusOK)
	dranged := request(t, "GET", link, "", "", nil)
	dranged.Header.Set("Range", "bytes=1-2")
	c.do("download Range", dranged, http.StatusPartialContent)
	dunsat := request(t, "GET", link, "", "", nil)
	dunsat.Header.Set("Range", "bytes=100-")
	c.do("download unsatisfiable Range", dunsat, http.StatusRequestedRangeNotSatisfiable)
	c.do("download unknown parameter", request(t, "GET", link+"&x=1", "", "", nil), http.StatusBadRequest)
	c.do("download bad query", request(t, "GET", strings.ReplaceAll(link, "&", ";"), "", "", nil), http.StatusBadRequest)
	c.do("download altered", request(t, "GET", strings.Replace(link, "signature=", "signature=x", 1), "", "", nil), http.StatusForbidden)

	// ack
	c.do("ack 200", request(t, "POST", base+"/pending-uploads/"+small+"/ack", tok, "", nil), http.StatusOK)
	c.do("ack again 200", request(t, "POST", base+"/pending-uploads/"+small+"/ack", tok, "", nil), http.StatusOK)
	c.do("ack 404", request(t, "POST", base+"/pending-uploads/"+uuid.NewString()+"/ack", tok, "", nil), http.StatusNotFound)
	c.do("ack bad file_id", request(t, "POST", base+"/pending-uploads/nope/ack", tok, "", nil), http.StatusBadRequest)

	// CORS preflights, on every path of the document.
	for _, p := range []string{"/chat/uploads", "/chat/uploads/presign", "/pending-uploads",
		"/pending-uploads/" + small + "/content", "/pending-uploads/" + small + "/ack"} {
		req := request(t, "OPTIONS", base+p, "", "", nil)
		req.Header.Set("Origin", "https://canvas.example.com")
		req.Header.Set("Access-Control-Request-Method", "GET")
		c.do("preflight "+p, req, http.StatusNoContent)
	}
	// GET /uploads/limits: public, no token.
	c.do("limits", request(t, "GET", srv.URL+"/uploads/limits", "", "", nil), http.StatusOK)
	{
		req := request(t, "OPTIONS", srv.URL+"/uploads/limits", "", "", nil)
		req.Header.Set("Origin", "https://canvas.example.com")
		req.Header.Set("Access-Control-Request-Method", "GET")
		c.do("preflight /uploads/limits", req, http.StatusNoContent)
	}

	for _, want := range []string{
		"POST /workspaces/{workspaceId}/chat/uploads 200", "POST /workspaces/{workspaceId}/chat/uploads 400",
		"POST /workspaces/{workspaceId}/chat/uploads 401", "POST /workspaces/{workspaceId}/chat/uploads 409",
		"POST /workspaces/{workspaceId}/chat/uploads 413", "POST /workspaces/{workspaceId}/chat/uploads/presign 200",
		"POST /workspaces/{workspaceId}/chat/uploads/presign 413", "GET /workspaces/{workspaceId}/pending-uploads 200",
		"GET /workspaces/{workspaceId}/pending-uploads 400", "GET /workspaces/{workspaceId}/pending-uploads/{fileId}/content 200",
		"GET /workspaces/{workspaceId}/pending-uploads/{fileId}/content 307", "GET /workspaces/{workspaceId}/pending-uploads/{fileId}/content 404",
		"POST /workspaces/{workspaceId}/pending-uploads/{fileId}/ack 200", "POST /workspaces/{workspaceId}/pending-uploads/{fileId}/ack 404",
		"GET /uploads/limits 200",
		"GET /workspaces/{workspaceId}/pending-uploads/{fileId}/download 200", "GET /workspaces/{workspaceId}/pending-uploads/{fileId}/download 206",
		"GET /workspaces/{workspaceId}/pending-uploads/{fileId}/download 400", "GET /workspaces/{workspaceId}/pending-uploads/{fileId}/download 403",
		"GET /workspaces/{workspaceId}/pending-uploads/{fileId}/download 416",
	} {
		if !c.seen[want] {
			t.Errorf("no answer %s was validated", want)
		}
	}
}

// TestUnavailableMatchesDocument: with Postgres down, every route answers
// the document's 503, for the admin token (storage) and a workspace token
// (the token store).
func TestUnavailableMatchesDocument(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "postgres://nobody@" + l.Addr().String() + "/nothing?sslmode=disable&connect_timeout=2"
	l.Close()
	srv := apptest.NewServer(t, apptest.Options{Env: map[string]string{"DATABASE_URL": dead}})
	c := newChecker(t, srv.URL)
	base := srv.URL + "/workspaces/" + uuid.NewString()
	id := uuid.NewString()
	body, ctype := multipartBody(t, part{"a.txt", "text/plain", "a"})
	for _, r := range []struct {
		method, path, ctype string
		body                []byte
	}{
		{"POST", "/chat/uploads", ctype, body},
		{"GET", "/pending-uploads", "", nil},
		{"GET", "/pending-uploads/" + id + "/content", "", nil},
		{"POST", "/pending-uploads/" + id + "/ack", "", nil},
	} {
		for _, tok := range []string{srv.AdminToken, "pu_" + uuid.NewString()} {
			c.do(r.method+" "+r.path, request(t, r.method, base+r.path, tok, r.ctype, r.body), http.StatusServiceUnavailable)
		}
	}
}

// put sends data to a presigned URL with exactly the headers presign gave.
func put(t *testing.T, u string, headers map[string]string, data []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, u, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if strings.EqualFold(k, "Content-Length") {
			req.ContentLength, _ = strconv.ParseInt(v, 10, 64)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT to presigned URL: status %d", resp.StatusCode)
	}
}
