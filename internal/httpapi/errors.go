package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
	"github.com/pendinguploads/pendinguploads/internal/limits"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// Error is an answer of API.md other than a success: its status, and the
// JSON body {"error": Message, "code": Code} with Fields beside it. The
// code is what clients branch on (wire.Code: one per meaning); the message
// is for people. Handlers return one (or an error that wraps one, whose
// text says why, for the log), or any other error, which the table below
// turns into one; fail answers it.
type Error struct {
	Status  int
	Code    wire.Code
	Message string
	Fields  map[string]any
	// RetryAfter, when set, is the Retry-After header's seconds.
	RetryAfter int
}

func (e *Error) Error() string { return e.Message }

// The answers of API.md that name no file or value.
var (
	errMissingToken = &Error{Status: http.StatusUnauthorized, Code: wire.CodeMissingToken, Message: "missing workspace auth token"}
	// A token sent without its scheme (Authorization: pu_…): missing as
	// well, since only Bearer counts, but the message says what to add.
	errMissingScheme = &Error{Status: http.StatusUnauthorized, Code: wire.CodeMissingToken, Message: msgMissingScheme}
	errInvalidToken  = &Error{Status: http.StatusUnauthorized, Code: wire.CodeInvalidToken, Message: "invalid workspace auth token"}
	// An org token whose anchor workspace is gone (or never set): refused
	// unless ACCEPT_UNANCHORED_ORG_TOKENS keeps the platform's legacy rule.
	errUnanchoredToken = &Error{Status: http.StatusUnauthorized, Code: wire.CodeOrgTokenUnanchored, Message: "org token without an anchor workspace"}
	// A session cookie on a request another site's page may have made.
	errForeignOrigin = &Error{Status: http.StatusForbidden, Code: wire.CodeForbiddenOrigin, Message: "cross-origin request refused"}
	// A download link that is not one of ours for this file, or is past
	// its time: what happened, and what to do (its holder may have no
	// token: it asks whoever gave it).
	errLinkInvalid = &Error{Status: http.StatusForbidden, Code: wire.CodeLinkInvalid, Message: msgLinkInvalid}
	errLinkExpired = &Error{Status: http.StatusForbidden, Code: wire.CodeLinkExpired, Message: msgLinkExpired}
	// One text per condition: a dependency of ours (Postgres, S3) down or
	// too slow, whichever statement met it; the control plane without a
	// verdict on a session.
	errStorageDown = &Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, Message: "storage unavailable, retry shortly"}
	// Another call of the same workspace held its turn past the bounded
	// wait (pendinguploads.ErrWorkspaceBusy): nothing was stored.
	errWorkspaceBusy = &Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, Message: "workspace busy, retry shortly", RetryAfter: 1}
	errSessionDown   = &Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, Message: "session check unavailable, retry shortly"}
	// The download links' keys, to be read again from their secret, not
	// read: no link is signed or checked with keys that may be stale.
	errLinkKeysDown     = &Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, Message: "download link keys unavailable, retry shortly"}
	errInternal         = &Error{Status: http.StatusInternalServerError, Code: wire.CodeInternal, Message: "storage error"}
	errNotFound         = &Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Message: "not found"}
	errMethod           = &Error{Status: http.StatusMethodNotAllowed, Code: wire.CodeMethodNotAllowed, Message: "method not allowed"}
	errBadWorkspaceID   = &Error{Status: http.StatusBadRequest, Code: wire.CodeBadWorkspaceID, Message: "invalid workspace ID"}
	errBadFileID        = &Error{Status: http.StatusBadRequest, Code: wire.CodeBadFileID, Message: "invalid file_id"}
	errUnknownWorkspace = &Error{Status: http.StatusNotFound, Code: wire.CodeWorkspaceNotFound, Message: "workspace not found"}
	// A file that is gone, or another workspace's (the store tells them
	// not apart, nor does the answer, nor its log line): ack's words, and
	// content's.
	errGone    = &Error{Status: http.StatusNotFound, Code: wire.CodeFileNotFound, Message: "pending upload not found, expired, or already acked"}
	errExpired = &Error{Status: http.StatusNotFound, Code: wire.CodeFileNotFound, Message: "pending upload not found or expired"}

	errBadQuery        = &Error{Status: http.StatusBadRequest, Code: wire.CodeBadQuery, Message: "invalid query string"}
	errUnknownParam    = &Error{Status: http.StatusBadRequest, Code: wire.CodeUnknownParam, Message: "unknown query parameter"}
	errBadLimit        = &Error{Status: http.StatusBadRequest, Code: wire.CodeBadLimit, Message: "invalid limit (want 1 to 100)"}
	errBadCursor       = &Error{Status: http.StatusBadRequest, Code: wire.CodeBadCursor, Message: "invalid cursor"}
	errBadContentParam = &Error{Status: http.StatusBadRequest, Code: wire.CodeUnknownParam, Message: "invalid query parameter (only redirect=1)"}
	errBadRange        = &Error{Status: http.StatusRequestedRangeNotSatisfiable, Code: wire.CodeRangeNotSatisfiable, Message: "range not satisfiable"}

	errMalformedMultipart = &Error{Status: http.StatusBadRequest, Code: wire.CodeMalformedMultipart, Message: "malformed multipart body"}
	errMalformedJSON      = &Error{Status: http.StatusBadRequest, Code: wire.CodeMalformedJSON, Message: "malformed JSON body"}
	errNoFiles            = &Error{Status: http.StatusBadRequest, Code: wire.CodeNoFiles, Message: "no files field in request"}
	errTooManyFiles       = &Error{Status: http.StatusBadRequest, Code: wire.CodeTooManyFiles, Message: fmt.Sprintf("too many files (limit %d)", limits.MaxFiles)}
	errBadUploadID        = &Error{Status: http.StatusBadRequest, Code: wire.CodeBadUploadID, Message: "invalid upload_id"}
	errUploadNotFound     = &Error{Status: http.StatusNotFound, Code: wire.CodeUploadNotFound, Message: "upload not found"}
	errNotMultipart       = &Error{Status: http.StatusBadRequest, Code: wire.CodeNotMultipart, Message: "not a multipart upload"}
	// Presigned uploads without a bucket: the presign route is not there
	// (404); a commit is a request this service cannot take (400).
	errPresignOff       = &Error{Status: http.StatusNotFound, Code: wire.CodePresignDisabled, Message: msgPresignOff}
	errCommitPresignOff = &Error{Status: http.StatusBadRequest, Code: wire.CodePresignDisabled, Message: msgPresignOff}
)

const (
	msgPresignOff    = "presigned uploads are not enabled"
	msgLinkInvalid   = "invalid download link: ask for a new link (POST /workspaces/{workspaceId}/pending-uploads/{fileId}/link, or pendingctl link FILE_ID)"
	msgLinkExpired   = "download link expired: ask for a new link (POST /workspaces/{workspaceId}/pending-uploads/{fileId}/link, or pendingctl link FILE_ID)"
	msgMissingScheme = `missing workspace auth token: the Authorization header has no Bearer scheme (send Authorization: Bearer TOKEN)`
	// A multipart upload over the request cap: what to do instead.
	msgFilesTooLarge        = "request body too large: send the files in requests under max bytes"
	msgFilesTooLargePresign = "request body too large: send the files in requests under max bytes, or each through POST /workspaces/{workspaceId}/chat/uploads/presign"
)

// The answers that name what they refuse.

func errBodyTooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: wire.CodeRequestTooLarge, Message: "request body too large", Fields: map[string]any{"max": limit}}
}

// errFilesTooLarge is errBodyTooLarge for the files of a multipart
// upload, with the next step: requests under max, and, with a bucket,
// the presign route, which takes a file up to the per-file cap.
func errFilesTooLarge(limit int64, presign bool) *Error {
	e := *errBodyTooLarge(limit)
	e.Message = msgFilesTooLarge
	if presign {
		e.Message = msgFilesTooLargePresign
	}
	return &e
}

func errFileTooLarge(name string, size, limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: wire.CodeFileTooLarge, Message: "file exceeds per-file cap",
		Fields: map[string]any{"filename": name, "size": size, "max": limit}}
}

func errEmptyFile(name string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: wire.CodeEmptyFile, Message: "empty file", Fields: map[string]any{"filename": name}}
}

func errBadSHA256(name string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: wire.CodeBadSHA256, Message: "invalid sha256 (want 64 hex digits)", Fields: map[string]any{"filename": name}}
}

func errBadParts(name string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: wire.CodeBadParts, Message: "invalid parts (want one sha256 per part of part_bytes, for a multipart file)",
		Fields: map[string]any{"filename": name}}
}

func errUploadCommitted(id string) *Error {
	return &Error{Status: http.StatusConflict, Code: wire.CodeUploadCommitted, Message: "upload already committed", Fields: map[string]any{"upload_id": id}}
}

func errDuplicateUploadID(id string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: wire.CodeDuplicateUploadID, Message: "duplicate upload_id", Fields: map[string]any{"upload_id": id}}
}

func errQuota(q *pendinguploads.QuotaError) *Error {
	return &Error{Status: http.StatusConflict, Code: wire.CodeQuotaExceeded, Message: "workspace quota exceeded",
		Fields: map[string]any{"quota": q.Quota, "limit": q.Limit, "pending": q.Pending, "adding": q.Adding}}
}

func errNotReceived(id string) *Error {
	return &Error{Status: http.StatusConflict, Code: wire.CodeUploadNotReceived, Message: "upload not received", Fields: map[string]any{"upload_id": id}}
}

// answers is the table from the errors of the layers below to API.md's
// answers: the first whose error err wraps is the answer.
var answers = []struct {
	err    error
	answer *Error
}{
	{auth.ErrMissingScheme, errMissingScheme},
	{auth.ErrMissing, errMissingToken},
	{auth.ErrInvalid, errInvalidToken},
	{auth.ErrNotAllowed, errInvalidToken},
	{auth.ErrUnanchored, errUnanchoredToken},
	{auth.ErrForeignOrigin, errForeignOrigin},
	{auth.ErrSessionUnavailable, errSessionDown},
	{downloadlink.ErrInvalid, errLinkInvalid},
	{downloadlink.ErrExpired, errLinkExpired},
	{downloadlink.ErrKeysUnavailable, errLinkKeysDown},
	{pendinguploads.ErrWorkspaceBusy, errWorkspaceBusy},
	{pendinguploads.ErrUnknownWorkspace, errUnknownWorkspace},
	{pendinguploads.ErrNotFound, errGone},
	{pendinguploads.ErrUploadNotFound, errUploadNotFound},
	{pendinguploads.ErrNotMultipart, errNotMultipart},
}

// answerFor is the answer to err: the *Error it wraps; else the table's;
// a body over its cap is 413; a commit's refusal 409; a dependency down
// or too slow 503 (worth a retry); anything else is a bug, 500, whose
// text goes only to the log.
func (a *API) answerFor(err error) *Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	for _, t := range answers {
		if errors.Is(err, t.err) {
			return t.answer
		}
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return errBodyTooLarge(a.MaxRequestBytes)
	}
	if nr, ok := errors.AsType[*pendinguploads.NotReceivedError](err); ok {
		return errNotReceived(nr.UploadID.String())
	}
	if ce, ok := errors.AsType[*pendinguploads.CommittedError](err); ok {
		return errUploadCommitted(ce.UploadID.String())
	}
	if q, ok := errors.AsType[*pendinguploads.QuotaError](err); ok {
		return errQuota(q)
	}

	if pendinguploads.IsUnavailable(err) {
		return errStorageDown
	}
	return errInternal
}

// fail answers err and logs it: a server-side failure as an error with
// its cause; a refusal of the caller's credentials as a warning; any
// other refusal at info (a file of another workspace among them, as one
// that is not there). The line
// names the request's workspace and file, and who called (a token's safe
// prefix, a session's user), never a token or a cookie. It does no I/O
// but the answer.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := a.answerFor(err)
	args := []any{"status", e.Status, "code", e.Code, "error", e.Message, "method", r.Method, "path", r.URL.Path}
	if err != error(e) {
		args = append(args, "reason", err.Error())
	}
	for _, k := range []string{"filename", "size", "max", "upload_id", "quota", "limit", "pending", "adding"} {
		if v, ok := e.Fields[k]; ok {
			args = append(args, k, v)
		}
	}
	if v := r.PathValue("workspaceId"); v != "" {
		args = append(args, "workspace_id", v)
	}
	if v := r.PathValue("fileId"); v != "" {
		args = append(args, "file_id", v)
	}
	if id := auth.FromContext(r.Context()); id != nil {
		args = append(args, id.LogAttrs()...)
	}
	if _, ok := e.Fields["quota"]; ok {
		a.Metrics.Count(metrics.QuotaRefused, nil, 1, nil)
	}
	switch {
	case e.Status >= 500:
		a.logger().Error("request failed", args...)
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		a.logger().Warn("refused", args...)
	default:
		a.logger().Info("refused", args...)
	}
	w.Header().Set("Cache-Control", "no-store")
	switch {
	case e.RetryAfter > 0:
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	case e.Status == http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", retryAfterUnavailable)
	}
	writeEncoded(w, e.Status, errorBody(e))
}

// retryAfterUnavailable is every 503's Retry-After, in seconds: a
// dependency down or too slow (a database restarting, failing over or
// resuming from a pause) is worth a retry soon, not at once.
const retryAfterUnavailable = "5"

// errorBody encodes e: "error" and "code" first, as API.md writes them,
// then its fields (in key order).
func errorBody(e *Error) []byte {
	b, _ := json.Marshal(wire.ErrorBody{Error: e.Message, Code: e.Code})
	if len(e.Fields) == 0 {
		return b
	}
	f, err := json.Marshal(e.Fields)
	if err != nil { // plain values: cannot happen
		slog.Error("encode error fields", "err", err)
		return b
	}
	return append(append(b[:len(b)-1], ','), f[1:]...)
}

// writeJSON answers v as JSON, not to be cached. Encoding a map or
// struct of plain values cannot fail; if the client is gone, there is no
// one to tell.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSONCached(w, status, v)
}

// writeJSONCached is writeJSON keeping the Cache-Control the caller set.
func writeJSONCached(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		slog.Error("encode response", "err", err)
		status, b = http.StatusInternalServerError, []byte(`{"error":"storage error","code":"internal"}`)
	}
	writeEncoded(w, status, b)
}

// writeJSONBody answers b, a JSON value already encoded, not to be
// cached.
func writeJSONBody(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Cache-Control", "no-store")
	writeEncoded(w, status, b)
}

func writeEncoded(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
