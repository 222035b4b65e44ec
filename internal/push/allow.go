package push

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// Verifier checks a bearer identity against a workspace: nil when it
// may act on it. pendinguploads.Store is one, with the API's own
// look-up.
type Verifier interface {
	Verify(ctx context.Context, id *auth.Identity, ws *uuid.UUID) error
}

var _ Verifier = (*pendinguploads.Store)(nil)

// ErrRefused is returned by Allow for credentials that may not subscribe:
// a username that is not a workspace id, a client id that is not that
// workspace's, or a token not allowed on it (unknown, revoked, another
// workspace's). Any other error is the look-up's (the database): the
// caller fails closed.
var ErrRefused = errors.New("push: credentials refused")

// Credentials are what an MQTT CONNECT carries.
type Credentials struct {
	// Username is the workspace's id, optionally followed by a query
	// (?x-amz-customauthorizer-name=…, IoT Core's way to name the
	// authorizer in the username): the query is ignored.
	Username string
	// Password is a token allowed on the workspace: the API's bearer.
	Password []byte
	// ClientID must start with the workspace's id (IoT Core drops the
	// older of two connections with one client id: a workspace can only
	// ever drop its own).
	ClientID string
}

// Allow returns the workspace c may subscribe to, after the API's token
// check (v.Verify, one look-up by SHA-256); ErrRefused for credentials
// that may not, or the look-up's error.
func Allow(ctx context.Context, v Verifier, c Credentials) (uuid.UUID, error) {
	name, _, _ := strings.Cut(c.Username, "?")
	ws, err := uuid.Parse(name)
	if err != nil || ws == uuid.Nil || len(name) != 36 {
		return uuid.Nil, fmt.Errorf("%w: username is not a workspace id", ErrRefused)
	}
	if !validClientID(c.ClientID, ws) {
		return uuid.Nil, fmt.Errorf("%w: client id is not the workspace id, optionally followed by - and up to 64 letters or digits", ErrRefused)
	}
	tok := string(c.Password)
	if tok == "" || len(tok) > auth.MaxTokenBytes {
		return uuid.Nil, fmt.Errorf("%w: no token", ErrRefused)
	}
	id := auth.TokenIdentity(tok)
	switch err := v.Verify(ctx, id, &ws); {
	case errors.Is(err, auth.ErrInvalid), errors.Is(err, auth.ErrNotAllowed), errors.Is(err, auth.ErrUnanchored):
		return uuid.Nil, fmt.Errorf("%w: %w", ErrRefused, err)
	case err != nil:
		return uuid.Nil, err
	}
	return ws, nil
}

// MaySubscribe reports whether a connection Allow admitted for ws may
// subscribe to filter: its own topic, exactly (no wildcard).
func MaySubscribe(ws uuid.UUID, filter string) bool { return filter == Topic(ws) }

// validClientID: ws's id, optionally followed by "-" and 1..64 ASCII
// letters or digits (a policy resource cannot be widened by a wildcard).
func validClientID(id string, ws uuid.UUID) bool {
	rest, ok := strings.CutPrefix(id, ws.String())
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	rest, ok = strings.CutPrefix(rest, "-")
	if !ok || rest == "" || len(rest) > 64 {
		return false
	}
	for _, r := range rest {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}
