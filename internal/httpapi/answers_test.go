package httpapi_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// storeRequest is a request that reaches one method of the store: the
// route that calls it, with a body and a path it accepts.
type storeRequest func(t *testing.T, srv *fakeServer, ws uuid.UUID, tok, file string) *http.Request

// storeRequests are, by the store method they reach, requests that get
// past every check of the HTTP layer.
var storeRequests = map[string]storeRequest{
	"Stage": func(t *testing.T, srv *fakeServer, ws uuid.UUID, tok, _ string) *http.Request {
		body, ctype := form(t, file("a.txt", "text/plain", "hello"))
		return newRequest(t, "POST", uploadsURL(srv, ws.String()), tok, ctype, bytes.NewReader(body))
	},
	"Commit": func(t *testing.T, srv *fakeServer, ws uuid.UUID, tok, _ string) *http.Request {
		body := fmt.Sprintf(`{"files":[{"upload_id":%q}]}`, fakeUploadID)
		return newRequest(t, "POST", uploadsURL(srv, ws.String()), tok, "application/json", strings.NewReader(body))
	},
	"Presign": func(t *testing.T, srv *fakeServer, ws uuid.UUID, tok, _ string) *http.Request {
		return newRequest(t, "POST", presignURL(srv, ws.String()), tok, "application/json", strings.NewReader(`{"files":[{"name":"p.bin","size":3}]}`))
	},
	"Resume": func(t *testing.T, srv *fakeServer, ws uuid.UUID, tok, _ string) *http.Request {
		return newRequest(t, "POST", resumeURL(srv, ws.String(), fakeUploadID.String()), tok, "", nil)
	},
	"Abort": func(t *testing.T, srv *fakeServer, ws uuid.UUID, tok, _ string) *http.Request {
		return newRequest(t, "DELETE", resumeURL(srv, ws.String(), fakeUploadID.String()), tok, "", nil)
	},
	"List": func(t *testing.T, srv *fakeServer, ws uuid.UUID, tok, _ string) *http.Request {
		return newRequest(t, "GET", listURL(srv, ws.String()), tok, "", nil)
	},
	"Fetch": func(t *testing.T, srv *fakeServer, ws uuid.UUID, tok, file string) *http.Request {
		return newRequest(t, "GET", contentURL(srv, ws.String(), file), tok, "", nil)
	},
	"Open": func(t *testing.T, srv *fakeServer, ws uuid.UUID, tok, file string) *http.Request {
		return newRequest(t, "GET", contentURL(srv, ws.String(), file), tok, "", nil)
	},
	"SignGet": func(t *testing.T, srv *fakeServer, ws uuid.UUID, tok, file string) *http.Request {
		return newRequest(t, "GET", contentURL(srv, ws.String(), file)+"?redirect=1", tok, "", nil)
	},
	"Ack": func(t *testing.T, srv *fakeServer, ws uuid.UUID, tok, file string) *http.Request {
		return newRequest(t, "POST", ackURL(srv, ws.String(), file), tok, "", nil)
	},
	// A refusal no store call checked: the bearer is looked up first.
	"Verify": func(t *testing.T, srv *fakeServer, ws uuid.UUID, tok, _ string) *http.Request {
		return newRequest(t, "GET", listURL(srv, ws.String())+"?limit=0", tok, "", nil)
	},
}

// fakeUploadID is the presigned upload the requests of storeRequests name.
var fakeUploadID = uuid.MustParse("00000000-0000-4000-8000-0000000000aa")

// TestStoreErrorsAnswered: each error the store returns, from each method
// that returns it, is answered as errors.go's table says: status, message
// and code, the fields that name what was refused, Cache-Control:
// no-store; a failure of ours is 500 "storage error" or 503, and its text
// never reaches the client. Over the fake, which returns the error.
func TestStoreErrorsAnswered(t *testing.T) {
	t.Parallel()
	secret := errors.New(`relation "secret_table" does not exist`)
	// Every method: the errors any call can meet.
	type answer struct {
		err    error
		status int
		msg    string
		extra  map[string]any
	}
	everywhere := []answer{
		{secret, 500, msgStorage, nil},
		{fmt.Errorf("list: %w", pendinguploads.ErrUnavailable), 503, "storage unavailable, retry shortly", nil},
		{auth.ErrInvalid, 401, msgInvalid, nil},
		{auth.ErrNotAllowed, 401, msgInvalid, nil},
		{auth.ErrSessionUnavailable, 503, "session check unavailable, retry shortly", nil},
		{pendinguploads.ErrUnknownWorkspace, 404, "workspace not found", nil},
	}
	upload := map[string]any{"upload_id": fakeUploadID.String()}
	own := map[string][]answer{
		"Stage": {{&pendinguploads.QuotaError{Quota: "pending_files", Limit: 10, Pending: 10, Adding: 1}, 409, "workspace quota exceeded",
			map[string]any{"quota": "pending_files", "limit": 10, "pending": 10, "adding": 1}}},
		"Commit": {
			{&pendinguploads.NotReceivedError{UploadID: fakeUploadID, Reason: "no object"}, 409, "upload not received", upload},
			{&pendinguploads.QuotaError{Quota: "pending_bytes", Limit: 5, Pending: 4, Adding: 3}, 409, "workspace quota exceeded",
				map[string]any{"quota": "pending_bytes", "limit": 5, "pending": 4, "adding": 3}},
		},
		"Presign": {
			{pendinguploads.ErrNoBucket, 404, msgPresignOff, nil},
			{&pendinguploads.ItemError{Index: 0, Err: pendinguploads.ErrBadParts}, 400,
				"invalid parts (want one sha256 per part of part_bytes, for a multipart file)", map[string]any{"filename": "p.bin"}},
		},
		"Resume": {
			{pendinguploads.ErrUploadNotFound, 404, "upload not found", nil},
			{pendinguploads.ErrUploadCommitted, 409, "upload already committed", upload},
			{pendinguploads.ErrNotMultipart, 400, "not a multipart upload", nil},
		},
		"Abort": {
			{pendinguploads.ErrUploadNotFound, 404, "upload not found", nil},
			{pendinguploads.ErrUploadCommitted, 409, "upload already committed", upload},
		},
		"List":  {{pendinguploads.ErrBadCursor, 400, "invalid cursor", nil}},
		"Fetch": {{pendinguploads.ErrNotFound, 404, msgExpired, nil}},
		"Open":  {{pendinguploads.ErrNotFound, 404, msgExpired, nil}},
		"Ack":   {{pendinguploads.ErrNotFound, 404, msgGone, nil}},
	}
	for method, req := range storeRequests {
		for _, a := range append(own[method], everywhere...) {
			t.Run(method+"/"+strings.ReplaceAll(a.err.Error(), "/", "|"), func(t *testing.T) {
				srv := newFakeServer(t, fakeOptions{Bucket: true})
				ws := uuid.New()
				tok := srv.Store.token(ws)
				staged := uploadParts(t, srv, ws.String(), tok, file("s.txt", "text/plain", "staged"))[0]
				srv.Store.failWith(method, a.err)
				res := send(t, req(t, srv, ws, tok, staged.FileID))
				wantError(t, res, a.status, a.msg, a.extra)
				if got := res.header.Get("Cache-Control"); got != "no-store" {
					t.Errorf("Cache-Control: got %q, want no-store", got)
				}
				if bytes.Contains(res.body, []byte("secret")) {
					t.Errorf("body: got %s, want no internal text", res.body)
				}
			})
		}
	}
}
