package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/pendinguploads/pendinguploads/client/humanize"
	"github.com/pendinguploads/pendinguploads/client/wire"
)

// APIError is a 4xx or 5xx answer of the API (or of the bucket, for a
// presigned request). Code is the body's "code" (wire.Code: one per
// meaning, API.md's table of codes; "" for an answer that is not the
// API's, a bucket's or a proxy's); branch on it and on Status, never on
// Message. Message is the body's "error", for people (or, for a body
// that is not the API's JSON, the status text and the start of the
// body). Fields is every other field of the body ("filename", "size",
// "max", "upload_id", …; numbers as json.Number).
type APIError struct {
	Status  int
	Code    wire.Code
	Message string
	Fields  map[string]any
	// Op names the call that failed ("list", "upload", "content", …).
	Op string
}

func (e *APIError) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "%d %s", e.Status, e.Message)
	if q, ok := e.Quota(); ok {
		fmt.Fprintf(&b, " (%s: %d waiting + %d would pass %d)", q.Quota, q.Pending, q.Adding, q.Limit)
		return b.String()
	}
	for _, k := range []string{"filename", "upload_id"} {
		if v, ok := e.Fields[k]; ok {
			fmt.Fprintf(&b, " (%s %v)", k, v)
		}
	}
	// size and max are bytes: whole numbers, with their size in words.
	for _, k := range []string{"size", "max"} {
		if n, ok := e.Int(k); ok {
			fmt.Fprintf(&b, " (%s %d bytes, %s)", k, n, humanize.Bytes(n))
		} else if v, ok := e.Fields[k]; ok {
			fmt.Fprintf(&b, " (%s %v)", k, v)
		}
	}
	return b.String()
}

// QuotaExceeded is the workspace quota a request was refused for: 409
// quota_exceeded, naming the quota ("pending_bytes" or
// "pending_files"), its limit, what waits and what the request would add.
// Nothing of the request was stored; acks (or time: files expire) make
// room.
type QuotaExceeded struct {
	Quota                  string
	Limit, Pending, Adding int64
}

// Quota returns the quota e refused the request for, if it did (code
// quota_exceeded).
func (e *APIError) Quota() (QuotaExceeded, bool) {
	if e.Code != wire.CodeQuotaExceeded {
		return QuotaExceeded{}, false
	}
	q, _ := e.Fields["quota"].(string)
	limit, _ := e.Int("limit")
	pending, _ := e.Int("pending")
	adding, _ := e.Int("adding")
	return QuotaExceeded{Quota: q, Limit: limit, Pending: pending, Adding: adding}, true
}

// Int returns the numeric field k of the body ("max", "size") and whether
// it is there.
func (e *APIError) Int(k string) (int64, bool) {
	switch v := e.Fields[k].(type) {
	case float64:
		return int64(v), true
	case json.Number:
		n, err := v.Int64()
		return n, err == nil
	}
	return 0, false
}

// TransportError is a request that got no answer: a refused or reset
// connection, a DNS failure, a timeout. It is retried where retrying is
// safe.
type TransportError struct {
	Op  string
	Err error
}

func (e *TransportError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *TransportError) Unwrap() error { return e.Err }

// Errors the client returns for answers that are not an APIError.
var (
	// ErrPresignNotOffered is returned by Presign when the server answers
	// 404: it has no bucket, so large files cannot take form B.
	ErrPresignNotOffered = errors.New("presigned uploads are not offered by this server")
	// ErrTooLarge is returned by Upload for a file that fits neither the
	// server's request cap nor a presigned upload.
	ErrTooLarge = errors.New("file too large for this server")
	// ErrIntegrity is matched by every *IntegrityError.
	ErrIntegrity = errors.New("downloaded bytes do not match")
)

// IntegrityError is a download whose size or SHA-256 differs from what the
// list or the answer's digest of the whole file (Repr-Digest, or an older
// server's Content-Digest on a 200) promised. Nothing of it must be kept.
type IntegrityError struct {
	FileID string
	// What is "size" or "sha256" or "repr-digest" (the digest header).
	What      string
	Want, Got string
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("file %s: %s mismatch: want %s, got %s", e.FileID, e.What, e.Want, e.Got)
}

// Is makes errors.Is(err, ErrIntegrity) true.
func (e *IntegrityError) Is(target error) bool { return target == ErrIntegrity }

// ErrorCode returns the code of the API's answer err is (wire.Code), or
// "" when err is no *APIError or its answer carried none.
func ErrorCode(err error) wire.Code {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// IsNotFound reports whether err is a 404: an upload absent, expired,
// acked, or of another workspace (the API never answers 403).
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsUnauthorized reports whether err is a 401: no token, an unknown or
// revoked one, or a token of another workspace.
func IsUnauthorized(err error) bool { return hasStatus(err, http.StatusUnauthorized) }

// IsUnavailable reports whether err says "retry later": a 503 (the API's
// code "unavailable"), a 429, a gateway's 502/504, or no answer at all.
// The client has already retried such errors where that was safe.
func IsUnavailable(err error) bool { return retryable(err) }

// IsQuotaExceeded reports whether err is a refusal for the workspace's
// quota, code quota_exceeded (APIError.Quota tells which, and by how
// much).
func IsQuotaExceeded(err error) bool { return ErrorCode(err) == wire.CodeQuotaExceeded }

// IsTooLarge reports whether err is a 413, or ErrTooLarge.
func IsTooLarge(err error) bool {
	return errors.Is(err, ErrTooLarge) || hasStatus(err, http.StatusRequestEntityTooLarge)
}

func hasStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status
}

// legacyCodes are the codes of the answers this client acts on, by their
// message, for a server older than codes (before 2026-11) whose bodies
// carry none. It is the one place a message is read; drop it once no
// such server runs.
var legacyCodes = map[string]wire.Code{
	"request body too large":             wire.CodeRequestTooLarge,
	"upload already committed":           wire.CodeUploadCommitted,
	"upload not received":                wire.CodeUploadNotReceived,
	"workspace quota exceeded":           wire.CodeQuotaExceeded,
	"storage unavailable, retry shortly": wire.CodeUnavailable,
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// readAPIError turns a 4xx/5xx answer into an *APIError and closes the body.
func readAPIError(resp *http.Response, op string) error {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &APIError{Status: resp.StatusCode, Op: op}
	var body map[string]any
	// Numbers stay json.Number: a byte count reads 4194304, not 4.194304e+06.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&body) == nil {
		if m, ok := body["error"].(string); ok {
			e.Message = m
			delete(body, "error")
			if c, ok := body["code"].(string); ok {
				e.Code = wire.Code(c)
				delete(body, "code")
			} else {
				// The message's head: a later server names its next step
				// after a colon ("request body too large: send …").
				head, _, _ := strings.Cut(m, ":")
				e.Code = legacyCodes[head]
			}
			if len(body) > 0 {
				e.Fields = body
			}
			return e
		}
	}
	e.Message = http.StatusText(resp.StatusCode)
	if s := strings.TrimSpace(string(raw)); s != "" {
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		e.Message += ": " + strings.Join(strings.Fields(s), " ")
	}
	return e
}
