// Package downloadlink signs and checks download links: a capability to
// read one file's bytes with a bare GET (no header, no cookie) for a
// bounded time, so that a browser's download manager can fetch the file
// itself, with its progress bar and its resume.
//
// A link is the file's download path (its workspace and file IDs) with
// two query parameters: expires (Unix seconds) and signature, the
// HMAC-SHA256 under the deployment's key of the workspace, the file and
// expires, base64url without padding. Nothing is stored: a link is
// checked by recomputing its signature, in constant time, and is good
// until expires, checked when a request starts. The signature travels in
// the query string, which neither the service's request logs nor API
// Gateway's access-log format writes (both log the path alone).
package downloadlink

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// The query parameters of a link.
const (
	ParamExpires   = "expires"
	ParamSignature = "signature"
)

// MinKeyBytes is the shortest key accepted (DOWNLOAD_LINK_KEY).
const MinKeyBytes = 32

// Errors of Check. HTTP answers both with 403 and a code of its own.
var (
	// ErrInvalid: a link this deployment did not sign for this file (a
	// parameter missing, altered or malformed, another file's link, a
	// link of another key).
	ErrInvalid = errors.New("downloadlink: invalid link")
	// ErrExpired: a link this deployment signed, past its expiry.
	ErrExpired = errors.New("downloadlink: link expired")
)

// Signer signs and checks links under one key. It is safe for
// concurrent use.
type Signer struct {
	key []byte
	// TTL is how long a link lasts from Sign (DOWNLOAD_LINK_TTL).
	TTL time.Duration
	// Now is the clock (New sets time.Now).
	Now func() time.Time
}

// New returns a Signer with key (at least MinKeyBytes) and ttl
// (positive).
func New(key string, ttl time.Duration) (*Signer, error) {
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("downloadlink: key shorter than %d bytes", MinKeyBytes)
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("downloadlink: ttl %s is not positive", ttl)
	}
	return &Signer{key: []byte(key), TTL: ttl, Now: time.Now}, nil
}

// Link is a signed link to one file: its query string (expires and
// signature, encoded) and when it expires.
type Link struct {
	Query   string
	Expires time.Time
}

// Sign returns a link to file of workspace, good for TTL from now
// (rounded down to the second).
func (s *Signer) Sign(workspace, file uuid.UUID) Link {
	exp := s.Now().Add(s.TTL).Truncate(time.Second)
	e := strconv.FormatInt(exp.Unix(), 10)
	q := url.Values{ParamExpires: {e}, ParamSignature: {s.signature(workspace, file, e)}}
	return Link{Query: q.Encode(), Expires: exp.UTC()}
}

// Verified is a link Check accepted: the one file of one workspace its
// holder may fetch. Only Check makes one; the zero Verified names no file
// (IsZero), and whoever takes one refuses it.
type Verified struct {
	workspace, file uuid.UUID
}

// Workspace is the workspace of the file the link names.
func (v Verified) Workspace() uuid.UUID { return v.workspace }

// File is the file the link names.
func (v Verified) File() uuid.UUID { return v.file }

// IsZero reports whether v was not made by Check.
func (v Verified) IsZero() bool { return v == Verified{} }

// Check checks a link's expires and signature (as the query gave them)
// for file of workspace: the Verified file when this Signer's key signed
// exactly them and expires has not passed; ErrInvalid when it did not
// sign them; ErrExpired when it did, and the link is past its time.
func (s *Signer) Check(workspace, file uuid.UUID, expires, signature string) (Verified, error) {
	want := s.signature(workspace, file, expires)
	if !hmac.Equal([]byte(signature), []byte(want)) {
		return Verified{}, ErrInvalid
	}
	// Signed by us, so expires is ours: digits that parse.
	exp, err := strconv.ParseInt(expires, 10, 64)
	if err != nil {
		return Verified{}, ErrInvalid
	}
	if !s.Now().Before(time.Unix(exp, 0)) {
		return Verified{}, ErrExpired
	}
	return Verified{workspace: workspace, file: file}, nil
}

// signature is the HMAC-SHA256 of a link's fields, base64url without
// padding: a version line, then the UUIDs in canonical form and expires
// as the query held it, one a line (expires last, so no two field lists
// give one message).
func (s *Signer) signature(workspace, file uuid.UUID, expires string) string {
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "pendinguploads download link v1\n%s\n%s\n%s", workspace, file, expires)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
